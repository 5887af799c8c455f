package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// syntheticReport is the report of a ppc run of two producers and one consumer over
// three and a half seconds, built from measured batches at made-up times, so that
// the report's files can be checked without a server.
func syntheticReport(t *testing.T) *Report {
	t.Helper()
	origin := time.Unix(1_700_000_000, 0)
	cfg := Config{Kind: PinnedProducerAndConsumer, Producers: 2, Consumers: 1, Streams: 2, Batches: 35}.WithDefaults()
	var stats []*actorStats
	for i, role := range []Role{RoleProducer, RoleProducer, RoleConsumer} {
		st := &actorStats{role: role, index: i % 2, stream: streamName(i % 2)}
		st.series.origin = origin
		for k := range 35 {
			latency := time.Duration(1000+100*k+7*i) * time.Microsecond
			if k == 20 {
				latency = 40 * time.Millisecond // a tail
			}
			batchAt(st, origin, time.Duration(k+1)*100*time.Millisecond, latency)
		}
		stats = append(stats, st)
	}
	r := newReport(&cfg, stats, origin, 4*time.Second)
	r.Verification = Verification{Enabled: true, MessagesProduced: 70_000, MessagesExpected: 35_000, MessagesConsumed: 35_000}
	r.Compare(&Baseline{
		Loopback:        Figures{Role: RoleProducer, Actors: 2, WireMBPerSec: 2000},
		SequentialWrite: []DiskWrite{{Name: DiskWritePageCache, MBPerSec: 1000}, {Name: DiskWriteSynced, MBPerSec: 500}},
	})
	return r
}

func TestReportCompare(t *testing.T) {
	r := syntheticReport(t)
	if len(r.Baseline.Ratios) != 2 {
		t.Fatalf("ratios %+v", r.Baseline.Ratios)
	}
	for i, f := range r.Totals {
		ratio := r.Baseline.Ratios[i]
		if ratio.Role != f.Role || !within(ratio.ToLoopback, f.WireMBPerSec/2000, 1e-9) ||
			!within(ratio.ToPageCache, f.WireMBPerSec/1000, 1e-9) || !within(ratio.ToSyncedWrite, f.WireMBPerSec/500, 1e-9) {
			t.Errorf("ratio %+v for %s at %.1f wire MB/s", ratio, f.Role, f.WireMBPerSec)
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "× loopback") || !strings.Contains(table.String(), "p9999") {
		t.Errorf("table:\n%s", table.String())
	}
}

func TestWriteCSV(t *testing.T) {
	r := syntheticReport(t)
	var b bytes.Buffer
	if err := r.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// Batches end from 0.1 s to 3.5 s: seconds 0 to 3, for each of two roles.
	if len(rows) != 1+2*4 || strings.Join(rows[0], ",") != strings.Join(CSVHeader, ",") {
		t.Fatalf("rows:\n%v", rows)
	}
	if got := strings.Join(rows[1][:6], ","); got != "0,producer,18000,18,18000,18" {
		t.Errorf("first row %q: 9 batches each of two producers in second 0", got)
	}
	if got := strings.Join(rows[8][:6], ","); got != "3,consumer,6000,6,12000,12" {
		t.Errorf("last row %q: 6 batches (3.0 s to 3.5 s) in the half second the consumer ran", got)
	}
}

// chartSVGs returns each <svg> element of page, parsed.
func chartSVGs(t *testing.T, page string) map[string]svgElement {
	t.Helper()
	charts := map[string]svgElement{}
	for _, m := range regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1) {
		var svg svgElement
		if err := xml.Unmarshal([]byte(m), &svg); err != nil {
			t.Fatalf("a chart is not well-formed SVG: %v\n%s", err, m)
		}
		charts[svg.ID] = svg
	}
	return charts
}

type svgElement struct {
	ID    string `xml:"id,attr"`
	Lines []struct {
		Name      string `xml:"data-name,attr"`
		Polylines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
		Circles []struct {
			Title string `xml:"title"`
		} `xml:"circle"`
	} `xml:"g"`
}

// The page has its four charts, each a line per role (two for latency over time)
// with a point per second or per histogram bucket, and it loads nothing from
// anywhere.
func TestWriteHTML(t *testing.T) {
	r := syntheticReport(t)
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	offline := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, external := range []string{"http://", "https://", "src=", "@import", "url("} {
		if strings.Contains(offline, external) {
			t.Errorf("the page refers to %q", external)
		}
	}
	charts := chartSVGs(t, page)
	if len(charts) != len(ReportCharts) {
		t.Fatalf("%d charts, want %v", len(charts), ReportCharts)
	}
	wantLines := map[string]int{ChartThroughput: 2, ChartLatency: 4, ChartPercentiles: 2, ChartHistogram: 2}
	for _, id := range ReportCharts {
		svg, ok := charts[id]
		if !ok {
			t.Errorf("no chart %s", id)
			continue
		}
		if len(svg.Lines) != wantLines[id] {
			t.Errorf("%s: %d lines, want %d", id, len(svg.Lines), wantLines[id])
		}
		for _, l := range svg.Lines {
			points := len(strings.Fields(l.Polylines[0].Points))
			if points < 4 || points != len(l.Circles) || !strings.HasPrefix(l.Circles[0].Title, l.Name+": ") {
				t.Errorf("%s line %s: %d points, %d circles", id, l.Name, points, len(l.Circles))
			}
		}
	}
	if n := len(charts[ChartThroughput].Lines[0].Circles); n != 4 {
		t.Errorf("throughput: %d points for 4 seconds", n)
	}
	for _, want := range []string{"p99.99", "× loopback", "verification OK", "producer 1 (bench-stream-2)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
}

func TestWriteReportDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "report")
	r := syntheticReport(t)
	if err := r.WriteReportDir(dir); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(dir, ReportJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || len(back.Series) != 8 || len(back.Distributions) != 2 || back.Baseline == nil {
		t.Fatalf("summary.json (%v): %d intervals, %d distributions", err, len(back.Series), len(back.Distributions))
	}
	for _, name := range []string{ReportCSVFile, ReportHTMLFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// chromiumBinary finds a headless-capable Chromium or Chrome, or "".
func chromiumBinary() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// The report renders in a real browser: Chromium loads the page from disk with the
// network off, runs its check script, and every chart is laid out with lines of
// non-zero size. Skipped where no Chromium is installed (apt-get install chromium),
// so CI does not depend on one.
func TestHTMLReportRendersInChromium(t *testing.T) {
	browser := chromiumBinary()
	if browser == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH")
	}
	dir := t.TempDir()
	if err := syntheticReport(t).WriteReportDir(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+t.TempDir(),
		"--proxy-server=127.0.0.1:9", // any request for the network would fail
		"--dump-dom", "file://"+filepath.Join(dir, ReportHTMLFile))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	body := regexp.MustCompile(`<body[^>]*>`).FindString(string(dom))
	if !strings.Contains(body, `data-charts-rendered="4"`) {
		t.Fatalf("the browser laid out fewer than 4 charts: %s", body)
	}
	for _, id := range ReportCharts {
		if !regexp.MustCompile(`<svg[^>]*id="` + id + `"[^>]*data-rendered="true"`).Match(dom) {
			t.Errorf("chart %s not rendered", id)
		}
	}
}
