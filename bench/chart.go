package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The HTML report's charts are SVG written here rather than a chart library's: the
// page must open with no network, and inlining a library such as ECharts (go-echarts
// loads it from a CDN) would put a megabyte of JavaScript into every report for
// three line charts. SVG also renders in any browser with scripts off, and a test
// can read it back as XML.

// chartPoint is one point of a line; label is its tooltip.
type chartPoint struct {
	x, y  float64
	label string
}

type chartLine struct {
	name   string
	color  string
	dashed bool
	points []chartPoint
}

// chartTick is one labelled position on an axis, in data units.
type chartTick struct {
	at    float64
	label string
}

type chartAxis struct {
	title string
	ticks []chartTick // nil: computed from the data
	// min and max are the axis range; when ticks is nil the range starts at 0 and
	// ends at the computed top tick.
	min, max float64
	// whole makes computed ticks whole numbers (seconds).
	whole bool
}

const (
	chartWidth         = 760
	chartHeight        = 300
	chartMarginLeft    = 70
	chartMarginRight   = 20
	chartMarginTop     = 30
	chartMarginBottom  = 50
	chartPlotWidth     = chartWidth - chartMarginLeft - chartMarginRight
	chartPlotHeight    = chartHeight - chartMarginTop - chartMarginBottom
	chartTickCountWant = 5
)

// niceTicks returns ticks from 0 to at least top, at 1, 2 or 5 times a power of
// ten, about chartTickCountWant of them.
func niceTicks(top float64, whole bool, format func(float64) string) []chartTick {
	if !(top > 0) || math.IsInf(top, 0) {
		top = 1
	}
	raw := top / chartTickCountWant
	magnitude := math.Pow(10, math.Floor(math.Log10(raw)))
	step := magnitude
	for _, m := range []float64{1, 2, 5, 10} {
		if m*magnitude >= raw {
			step = m * magnitude
			break
		}
	}
	if whole {
		step = max(step, 1)
	}
	var ticks []chartTick
	for i := 0; ; i++ {
		v := float64(i) * step
		ticks = append(ticks, chartTick{v, format(v)})
		if v >= top {
			break
		}
	}
	return ticks
}

// formatNumber prints v with as few digits as show it.
func formatNumber(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// lineChart draws lines on one plot as an SVG element with the class "chart" and
// the given id; each line is a polyline of class "series" with a circle per point
// that carries its tooltip.
func lineChart(id, title string, x, y chartAxis, lines []chartLine) string {
	if x.ticks == nil || y.ticks == nil {
		var xTop, yTop float64
		for _, l := range lines {
			for _, p := range l.points {
				xTop, yTop = max(xTop, p.x), max(yTop, p.y)
			}
		}
		if x.ticks == nil {
			x.ticks = niceTicks(xTop, x.whole, formatNumber)
			x.min, x.max = 0, x.ticks[len(x.ticks)-1].at
		}
		if y.ticks == nil {
			y.ticks = niceTicks(yTop, y.whole, formatNumber)
			y.min, y.max = 0, y.ticks[len(y.ticks)-1].at
		}
	}
	if x.max <= x.min {
		x.max = x.min + 1
	}
	if y.max <= y.min {
		y.max = y.min + 1
	}
	px := func(v float64) float64 {
		return chartMarginLeft + (v-x.min)/(x.max-x.min)*chartPlotWidth
	}
	py := func(v float64) float64 {
		return chartMarginTop + chartPlotHeight - (v-y.min)/(y.max-y.min)*chartPlotHeight
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="%s" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		html.EscapeString(id), chartWidth, chartHeight, chartWidth, chartHeight, html.EscapeString(title))
	fmt.Fprintf(&b, `<text class="title" x="%d" y="18">%s</text>`, chartMarginLeft, html.EscapeString(title))
	// Grid and axes.
	for _, t := range y.ticks {
		yy := py(t.at)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, chartMarginLeft, yy, chartMarginLeft+chartPlotWidth, yy)
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, chartMarginLeft-6, yy+4, html.EscapeString(t.label))
	}
	for _, t := range x.ticks {
		xx := px(t.at)
		fmt.Fprintf(&b, `<line class="grid" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, xx, chartMarginTop, xx, chartMarginTop+chartPlotHeight)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, xx, chartMarginTop+chartPlotHeight+16, html.EscapeString(t.label))
	}
	fmt.Fprintf(&b, `<rect class="frame" x="%d" y="%d" width="%d" height="%d"/>`, chartMarginLeft, chartMarginTop, chartPlotWidth, chartPlotHeight)
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="middle">%s</text>`, chartMarginLeft+chartPlotWidth/2, chartHeight-8, html.EscapeString(x.title))
	fmt.Fprintf(&b, `<text class="axis" transform="translate(16 %d) rotate(-90)" text-anchor="middle">%s</text>`, chartMarginTop+chartPlotHeight/2, html.EscapeString(y.title))
	// Lines, then a legend in the top right corner.
	for _, l := range lines {
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<g class="line" data-name="%s">`, html.EscapeString(l.name))
		var pts strings.Builder
		for _, p := range l.points {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(p.x), py(p.y))
		}
		fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`, l.color, dash, strings.TrimSpace(pts.String()))
		for _, p := range l.points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s</title></circle>`, px(p.x), py(p.y), l.color, html.EscapeString(l.name+": "+p.label))
		}
		b.WriteString(`</g>`)
	}
	for i, l := range lines {
		ly := chartMarginTop + 14 + i*16
		lx := chartMarginLeft + chartPlotWidth - 190
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, lx, ly-4, lx+24, ly-4, l.color, dash)
		fmt.Fprintf(&b, `<text class="legend" x="%d" y="%d">%s</text>`, lx+30, ly, html.EscapeString(l.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}
