package bench

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The files WriteReportDir writes.
const (
	ReportJSONFile = "summary.json"
	ReportCSVFile  = "timeseries.csv"
	ReportHTMLFile = "report.html"
)

// WriteReportDir writes the report into dir, creating it: summary.json (WriteJSON),
// timeseries.csv (WriteCSV) and report.html (WriteHTML).
func (r *Report) WriteReportDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report directory: %w", err)
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{ReportJSONFile, r.WriteJSON}, {ReportCSVFile, r.WriteCSV}, {ReportHTMLFile, r.WriteHTML}} {
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("report directory: %w", err)
		}
	}
	return nil
}

// CSVHeader is the first line of WriteCSV's output.
var CSVHeader = []string{"second", "role", "messages", "batches", "messages_per_second", "payload_mb_per_second", "p50_ms", "p99_ms", "max_ms"}

// WriteCSV writes the time series: one row per second of the measured window and
// role (Report.Series), latencies of the batches that ended in that second.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, in := range r.Series {
		row := []string{strconv.Itoa(in.Second), string(in.Role), strconv.FormatUint(in.Messages, 10), strconv.FormatUint(in.Batches, 10),
			f(in.MessagesPerSecond), f(in.PayloadMBPerSec), f(in.P50Ms), f(in.P99Ms), f(in.MaxMs)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

var roleColors = map[Role]string{
	RoleProducer:          "#1f77b4",
	RoleConsumer:          "#d62728",
	RoleProducingConsumer: "#2ca02c",
}

// The charts of the page, by id; the browser check counts them.
const (
	ChartThroughput  = "throughput"
	ChartLatency     = "latency-over-time"
	ChartPercentiles = "latency-percentiles"
	ChartHistogram   = "latency-histogram"
)

// ReportCharts lists the ids of the charts WriteHTML draws, in page order.
var ReportCharts = []string{ChartThroughput, ChartLatency, ChartPercentiles, ChartHistogram}

func (r *Report) charts() []template.HTML {
	var throughput, latency, spectrum, histogram []chartLine
	for _, total := range r.Totals {
		role := total.Role
		color := roleColors[role]
		mbps := chartLine{name: string(role) + "s", color: color}
		p50 := chartLine{name: string(role) + "s p50", color: color}
		p99 := chartLine{name: string(role) + "s p99", color: color, dashed: true}
		for _, in := range r.Series {
			if in.Role != role {
				continue
			}
			x := float64(in.Second)
			mbps.points = append(mbps.points, chartPoint{x, in.PayloadMBPerSec,
				fmt.Sprintf("second %d: %.1f MB/s, %.0f messages/s", in.Second, in.PayloadMBPerSec, in.MessagesPerSecond)})
			if in.Batches > 0 {
				// On a log scale: a tail a hundred times the median leaves both readable.
				p50.points = append(p50.points, chartPoint{x, logMs(in.P50Ms), fmt.Sprintf("second %d: p50 %.3f ms of %d batches", in.Second, in.P50Ms, in.Batches)})
				p99.points = append(p99.points, chartPoint{x, logMs(in.P99Ms), fmt.Sprintf("second %d: p99 %.3f ms of %d batches", in.Second, in.P99Ms, in.Batches)})
			}
		}
		throughput = append(throughput, mbps)
		latency = append(latency, p50, p99)
		for _, d := range r.Distributions {
			if d.Role != role {
				continue
			}
			s := chartLine{name: string(role) + "s", color: color}
			h := chartLine{name: string(role) + "s", color: color}
			n := float64(total.Latency.Samples)
			// The histogram is drawn in eighths of an octave (9 % wide), eight of
			// the recorded buckets each: at 1.6 % a few thousand batches leave most
			// buckets at 0 or 1 and the shape in the noise.
			var group struct {
				key   int
				count uint64
				upTo  float64
			}
			flush := func() {
				if group.count > 0 {
					h.points = append(h.points, chartPoint{logMs(group.upTo), float64(group.count),
						fmt.Sprintf("%d batches took up to %.3f ms (since the previous point)", group.count, group.upTo)})
				}
			}
			for _, b := range d.Buckets {
				x := math.Log10(n) // the last batch: 1-c reaches 1/n
				if b.Cumulative < 1 {
					x = min(-math.Log10(1-b.Cumulative), x)
				}
				s.points = append(s.points, chartPoint{x, b.UpToMs, fmt.Sprintf("%.4f%% of batches took at most %.3f ms", 100*b.Cumulative, b.UpToMs)})
				key := int(math.Floor(8 * math.Log2(max(b.UpToMs*1e6, 1))))
				if key != group.key {
					flush()
					group.key, group.count = key, 0
				}
				group.count += b.Count
				group.upTo = b.UpToMs
			}
			flush()
			spectrum = append(spectrum, s)
			histogram = append(histogram, h)
		}
	}
	var out []template.HTML
	add := func(svg string) { out = append(out, template.HTML(svg)) } // built by lineChart, which escapes every text
	add(lineChart(ChartThroughput, "Throughput over time (payload MB/s per second)", chartAxis{title: "second of the measured window", whole: true}, chartAxis{title: "MB/s"}, throughput))
	latencyAxis := decadeAxis(latency, func(p chartPoint) float64 { return p.y })
	add(lineChart(ChartLatency, "Batch latency over time (p50 solid, p99 dashed)", chartAxis{title: "second of the measured window", whole: true}, latencyAxis, latency))
	add(lineChart(ChartPercentiles, "Batch latency by percentile (merged histograms)", spectrumAxis(spectrum), chartAxis{title: "ms"}, spectrum))
	add(lineChart(ChartHistogram, "Batch latency distribution (batches per eighth of an octave)", decadeAxis(histogram, func(p chartPoint) float64 { return p.x }), chartAxis{title: "batches"}, histogram))
	return out
}

// spectrumAxis is a percentile axis: position k is the 1-10^-k quantile (0, 90 %,
// 99 %, ...), so that the tail gets as much room as the body.
func spectrumAxis(lines []chartLine) chartAxis {
	top := 1.0
	for _, l := range lines {
		for _, p := range l.points {
			top = max(top, p.x)
		}
	}
	a := chartAxis{title: "percentile", min: 0, max: math.Ceil(top)}
	labels := []string{"0", "90", "99", "99.9", "99.99", "99.999", "99.9999", "99.99999"}
	for k := 0; k <= int(a.max) && k < len(labels); k++ {
		a.ticks = append(a.ticks, chartTick{float64(k), labels[k]})
	}
	return a
}

// logMs places a latency on a decadeAxis; a zero (a clock too coarse to see the
// batch) sits a nanosecond up.
func logMs(ms float64) float64 { return math.Log10(max(ms, 1e-6)) }

// decadeAxis is a log10 axis of milliseconds (the values logMs gives) with a tick
// per power of ten, over the range of the coordinate of the points that at picks.
func decadeAxis(lines []chartLine, at func(chartPoint) float64) chartAxis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range lines {
		for _, p := range l.points {
			lo, hi = min(lo, at(p)), max(hi, at(p))
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = -1, 1
	}
	a := chartAxis{title: "latency, ms (log scale)", min: math.Floor(lo), max: math.Ceil(hi)}
	if a.max == a.min {
		a.max++
	}
	for k := a.min; k <= a.max; k++ {
		a.ticks = append(a.ticks, chartTick{k, formatNumber(math.Pow(10, k))})
	}
	return a
}

type htmlPage struct {
	R        *Report
	Setup    []string
	Verified string
	Charts   []template.HTML
	Rows     []htmlRow
	Actors   []htmlRow
}

type htmlRow struct {
	Name string
	F    Figures
}

// WriteHTML writes a page that needs nothing but itself: the setup, the totals and
// per-actor figures with every percentile, the verification, the baseline when
// measured, and four SVG charts: payload MB/s per second per role, p50 and p99
// batch latency per second per role, batch latency by percentile (0 to 99.99 % and
// beyond, from the merged histograms), and the latency histogram.
func (r *Report) WriteHTML(w io.Writer) error {
	page := htmlPage{R: r, Setup: strings.Split(r.setupLine(), "\n"), Verified: r.verificationLine(), Charts: r.charts()}
	for _, f := range r.Totals {
		page.Rows = append(page.Rows, htmlRow{fmt.Sprintf("all %d %ss", f.Actors, f.Role), f})
	}
	for _, f := range r.Actors {
		page.Actors = append(page.Actors, htmlRow{fmt.Sprintf("%s %d (%s)", f.Role, f.Index, f.Stream), f})
	}
	return htmlTemplate.Execute(w, page)
}

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"f1": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"f2": func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"f3": func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) },
	"f0": func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>iggy-bench {{.R.Kind}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.ok { color: #1a7f37; } .failed { color: #cf222e; font-weight: bold; }
svg.chart { display: block; margin: 1em 0; background: #fff; }
svg .grid { stroke: #e5e5e5; } svg .frame { fill: none; stroke: #999; }
svg .tick, svg .legend { font-size: 11px; fill: #444; } svg .axis { font-size: 12px; fill: #222; }
svg .title { font-size: 13px; font-weight: bold; fill: #222; }
.note { color: #555; font-size: 0.85em; }
</style>
</head>
<body>
<h1>iggy-bench: {{.R.Kind}}</h1>
{{range .Setup}}<p>{{.}}</p>
{{end}}
<pre class="{{if .R.Verification.OK}}ok{{else}}failed{{end}}">{{.Verified}}</pre>
<h2>Totals</h2>
{{template "figures" .Rows}}
{{with .R.Baseline}}
<h2>Baseline, measured in the same run</h2>
<p>Raw loopback TCP: {{f1 .Loopback.WireMBPerSec}} MB/s over {{.Loopback.Actors}} connection(s).
{{range .SequentialWrite}} Sequential write ({{.Name}}, {{.Dir}}): {{f1 .MBPerSec}} MB/s.{{end}}</p>
<table><tr><th>role</th><th>wire MB/s</th><th>× loopback</th><th>× page-cache write</th><th>× fdatasync-per-MiB write</th></tr>
{{range .Ratios}}<tr><td>{{.Role}}s</td><td>{{f1 .WireMBPerSecond}}</td><td>{{f2 .ToLoopback}}</td><td>{{f2 .ToPageCache}}</td><td>{{f2 .ToSyncedWrite}}</td></tr>
{{end}}</table>
{{end}}
<h2>Charts</h2>
{{range .Charts}}{{.}}
{{end}}
<h2>Per actor</h2>
{{template "figures" .Actors}}
<p class="note">MB is 10<sup>6</sup> bytes. Payload bytes are the messages' own; wire bytes the whole frames that carried them.
Latency is per batch: a send's round trip for producers, a poll's for consumers, a send and the polls that bring it back for
producing consumers. Percentiles come from the actors' histograms merged (buckets 1.6 % wide), never from averaged percentiles.
The charts are SVG; hover a point for its value.</p>
<script>
// For the browser check: how many charts were laid out with lines of non-zero size.
document.addEventListener("DOMContentLoaded", function () {
  var rendered = 0, points = 0;
  document.querySelectorAll("svg.chart").forEach(function (svg) {
    var box = svg.getBoundingClientRect(), lines = 0;
    svg.querySelectorAll("polyline.series").forEach(function (l) {
      var b = l.getBBox();
      if (b.width > 0 || b.height > 0) { lines++; }
      points += l.points.numberOfItems;
    });
    if (box.width > 0 && box.height > 0 && lines > 0) { rendered++; svg.setAttribute("data-rendered", "true"); }
  });
  document.body.setAttribute("data-charts-rendered", String(rendered));
  document.body.setAttribute("data-chart-points", String(points));
});
</script>
</body>
</html>
{{define "figures"}}<table>
<tr><th>actor</th><th>messages</th><th>msg/s</th><th>payload MB/s</th><th>wire MB/s</th><th>p50 ms</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th><th>mean</th><th>e2e p50 ms</th><th>e2e p99</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td>{{.F.Messages}}</td><td>{{f0 .F.MessagesPerSecond}}</td><td>{{f1 .F.PayloadMBPerSec}}</td><td>{{f1 .F.WireMBPerSec}}</td>
<td>{{f3 .F.Latency.P50Ms}}</td><td>{{f3 .F.Latency.P90Ms}}</td><td>{{f3 .F.Latency.P95Ms}}</td><td>{{f3 .F.Latency.P99Ms}}</td><td>{{f3 .F.Latency.P999Ms}}</td><td>{{f3 .F.Latency.P9999Ms}}</td><td>{{f3 .F.Latency.MaxMs}}</td><td>{{f3 .F.Latency.MeanMs}}</td>
<td>{{with .F.EndToEnd}}{{f3 .P50Ms}}{{else}}-{{end}}</td><td>{{with .F.EndToEnd}}{{f3 .P99Ms}}{{else}}-{{end}}</td></tr>
{{end}}</table>{{end}}
`))
