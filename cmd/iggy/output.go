package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// Output. In text mode a command prints the reference's "Executing ..." line, then
// its result: sentences, or tables aligned in columns. In JSON mode it prints one
// JSON document with the HTTP API's field names (or nothing, for commands that
// answer nothing over HTTP either). --quiet prints nothing on success.
//
// Tables are plain columns (text/tabwriter), not boxes: borders cost three columns
// a column, and without them every list fits an 80-column terminal, and reads well
// with grep, cut and awk. (github.com/olekukonko/tablewriter, tried, fitted the topic
// list into 80 columns only by cutting its headers to "Mess…".)

// listMode is the -l/--list-mode of list commands.
type listMode string

const (
	listTable listMode = "table"
	listLines listMode = "list"
)

func (m *listMode) String() string { return string(*m) }
func (m *listMode) Type() string   { return "table|list" }
func (m *listMode) Set(s string) error {
	switch listMode(s) {
	case listTable, listLines:
		*m = listMode(s)
		return nil
	}
	return fmt.Errorf("%q is not table or list", s)
}

// addListMode gives a list command its -l flag.
func addListMode(cmd *cobra.Command, m *listMode) {
	*m = listTable
	cmd.Flags().VarP(m, "list-mode", "l", "List mode: table (aligned columns) or list (one line per item, fields joined by |)")
}

func (a *app) jsonMode() bool { return a.flags.output == outputJSON }

// textMode: sentences and tables, not a document (JSON, or stats' TOML).
func (a *app) textMode() bool { return a.flags.output == outputText }

// executing prints the reference's first line of a command's output.
func (a *app) executing(format string, args ...any) {
	if a.flags.quiet || !a.textMode() {
		return
	}
	fmt.Fprintf(a.io.out, "Executing "+format+"\n", args...)
}

// say prints one result line in text mode.
func (a *app) say(format string, args ...any) {
	if a.flags.quiet || !a.textMode() {
		return
	}
	fmt.Fprintf(a.io.out, format+"\n", args...)
}

// emitJSON prints v as indented JSON in JSON mode.
func (a *app) emitJSON(v any) error {
	if a.flags.quiet || !a.jsonMode() {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = a.io.out.Write(append(b, '\n'))
	return err
}

// result prints a command's result: v in JSON mode, else text.
func (a *app) result(v any, text func()) error {
	if a.jsonMode() {
		return a.emitJSON(v)
	}
	if !a.flags.quiet {
		text()
	}
	return nil
}

// table prints rows under headers in aligned columns, or in list mode one line per
// row with the fields joined by '|'.
func (a *app) table(mode listMode, headers []string, rows [][]string) {
	if mode == listLines {
		for _, r := range rows {
			fmt.Fprintln(a.io.out, strings.Join(r, "|"))
		}
		return
	}
	w := tabwriter.NewWriter(a.io.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(headers, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	w.Flush()
}

// property is one row of a single object's description.
type property struct {
	name, value string
}

// properties prints an object as "name  value" lines, aligned. A value of several
// lines is indented under its first.
func (a *app) properties(props []property) {
	width := 0
	for _, p := range props {
		width = max(width, len(p.name))
	}
	for _, p := range props {
		lines := strings.Split(p.value, "\n")
		fmt.Fprintf(a.io.out, "%-*s  %s\n", width, p.name, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(a.io.out, "%-*s  %s\n", width, "", l)
		}
	}
}
