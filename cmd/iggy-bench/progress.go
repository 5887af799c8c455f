package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iggy-shard/iggy-shard/bench"
)

// progressDisplay shows a run's steps and progress on stderr: a bar redrawn in
// place on a terminal, or a plain line every plainLineInterval otherwise (a CI log,
// a file). Our own rather than a progress-bar library: one line of text redrawn
// with a carriage return needs only the terminal checks of golang.org/x/sys, which
// we have, where github.com/schollz/progressbar/v3 would bring three modules for it.
type progressDisplay struct {
	w        io.Writer
	terminal bool
	width    int // the terminal's columns

	drawn     bool           // a bar is on the current line
	completed bool           // the complete state has been shown
	last      bench.Progress // the last sample shown
	shown     bool           // a sample has been shown
	rateMBps  float64        // payload MB/s between the last two samples shown
	lineEvery time.Duration
}

const (
	plainLineInterval   = 2 * time.Second
	terminalRedrawEvery = bench.ProgressInterval
	terminalWidthMin    = 40
	terminalWidthMax    = 120
)

func newProgressDisplay(w io.Writer) *progressDisplay {
	d := &progressDisplay{w: w, lineEvery: plainLineInterval}
	if f, ok := w.(*os.File); ok {
		if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			d.terminal = true
			d.lineEvery = terminalRedrawEvery
			d.width = 80
			if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
				d.width = min(max(int(ws.Col), terminalWidthMin), terminalWidthMax)
			}
		}
	}
	return d
}

// Step prints a line; on a terminal it replaces the bar, which the next sample
// draws again below it.
func (d *progressDisplay) Step(line string) {
	if d.drawn {
		fmt.Fprint(d.w, "\r\033[K")
		d.drawn = false
	}
	fmt.Fprintf(d.w, "%s\n", line)
}

func (d *progressDisplay) Progress(p bench.Progress) {
	// Paced by the run's own clock, so that the display is a function of the
	// samples it is given.
	complete := progressFraction(p) >= 1
	if d.completed || (d.shown && p.Elapsed-d.last.Elapsed < d.lineEvery && !complete) {
		return
	}
	d.completed = complete
	if p.Elapsed > 0 {
		// The rate since the last sample shown: what the run does now, not its
		// average, which hides a stall.
		since := p.Elapsed - max(d.last.Elapsed, 0)
		if since > 0 && p.PayloadBytes >= d.last.PayloadBytes {
			d.rateMBps = float64(p.PayloadBytes-d.last.PayloadBytes) / since.Seconds() / 1e6
		}
	}
	d.last, d.shown = p, true
	text := describeProgress(p, d.rateMBps)
	if !d.terminal {
		fmt.Fprintf(d.w, "progress: %s\n", text)
		return
	}
	barWidth := d.width - len([]rune(text)) - 4
	line := text
	if barWidth >= 10 {
		filled := int(progressFraction(p) * float64(barWidth))
		line = "[" + strings.Repeat("=", filled) + strings.Repeat(" ", barWidth-filled) + "] " + text
	}
	fmt.Fprintf(d.w, "\r\033[K%s", line)
	d.drawn = true
}

// finish ends the bar's line, leaving the last state on the screen, so that what
// follows starts on a line of its own.
func (d *progressDisplay) finish() {
	if d.drawn {
		fmt.Fprint(d.w, "\n")
		d.drawn = false
	}
}

// progressFraction is how much of the measured window has passed: messages of a
// run of --batches, time of a run of --duration.
func progressFraction(p bench.Progress) float64 {
	switch {
	case p.Elapsed <= 0:
		return 0
	case p.MessagesTotal > 0:
		return min(float64(p.Messages)/float64(p.MessagesTotal), 1)
	case p.Duration > 0:
		return min(float64(p.Elapsed)/float64(p.Duration), 1)
	}
	return 0
}

// describeProgress is the bar's text: the pacing role's messages, the current
// rate, the time measured and an estimate of the time left.
func describeProgress(p bench.Progress, rateMBps float64) string {
	if p.Elapsed <= 0 {
		return fmt.Sprintf("warm-up, %s left", roundDuration(-p.Elapsed))
	}
	fraction := progressFraction(p)
	messages := fmt.Sprintf("%d", p.Messages)
	if p.MessagesTotal > 0 {
		messages += fmt.Sprintf("/%d", p.MessagesTotal)
	}
	left := "?"
	switch {
	case fraction >= 1:
		left = "0s"
	case p.Duration > 0:
		left = roundDuration(p.Duration - p.Elapsed)
	case fraction > 0:
		left = roundDuration(time.Duration(float64(p.Elapsed) * (1 - fraction) / fraction))
	}
	return fmt.Sprintf("%3.0f%% %s messages (%ss) %.1f MB/s elapsed %s ETA %s",
		100*fraction, messages, p.Role, rateMBps, roundDuration(p.Elapsed), left)
}

func roundDuration(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
