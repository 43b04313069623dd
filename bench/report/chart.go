package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Width and Height are a chart's size in the page.
const (
	Width  = 9 * vg.Inch
	Height = 4 * vg.Inch
)

// palette colours the series in order; a benchmark gives its tools in the
// same order in every chart, so a tool keeps its colour.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, // blue
	{0xd6, 0x27, 0x28, 0xff}, // red
	{0x2c, 0xa0, 0x2c, 0xff}, // green
	{0xff, 0x7f, 0x0e, 0xff}, // orange
	{0x94, 0x67, 0xbd, 0xff}, // purple
	{0x8c, 0x56, 0x4b, 0xff}, // brown
	{0xe3, 0x77, 0xc2, 0xff}, // pink
	{0x7f, 0x7f, 0x7f, 0xff}, // grey
}

func init() {
	// The page's own text is sans-serif; the charts' too.
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// Colour is series i's colour.
func Colour(i int) color.RGBA { return palette[i%len(palette)] }

// SVG draws the chart as an SVG document of Width x Height. Data the
// plotting library cannot draw (ranges beyond its floats) is an error, not
// a panic.
func (c Chart) SVG() (out []byte, err error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("chart %q: cannot be drawn: %v", c.Title, r)
		}
	}()
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text, p.Y.Label.Text = c.X, c.Y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if c.Bars != nil {
		err = c.bars(p)
	} else {
		err = c.lines(p)
	}
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", c.Title, err)
	}
	if c.YFloor != nil && (!c.LogY || *c.YFloor > 0) {
		p.Y.Min = *c.YFloor
	}
	w, err := p.WriterTo(Width, Height, "svg")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (c Chart) lines(p *plot.Plot) error {
	ymin, ymax := math.Inf(1), math.Inf(-1)
	if c.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	for i, s := range c.Lines {
		xys := make(plotter.XYs, 0, len(s.X))
		for j := range s.X {
			if c.LogY && s.Y[j] <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: s.X[j], Y: s.Y[j]})
			ymin, ymax = min(ymin, s.Y[j]), max(ymax, s.Y[j])
		}
		if len(xys) == 0 {
			continue
		}
		if s.Dots {
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return err
			}
			sc.Color, sc.Radius, sc.Shape = Colour(i), vg.Points(3.5), draw.CircleGlyph{}
			p.Add(sc)
			p.Legend.Add(s.Name, sc)
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = Colour(i), vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	if math.IsInf(ymin, 0) {
		ymin, ymax = 1, 10
	}
	if c.YFloor != nil && (!c.LogY || *c.YFloor > 0) {
		ymin = *c.YFloor
	}
	for _, m := range c.Marks {
		l, err := plotter.NewLine(plotter.XYs{{X: m.X, Y: ymin}, {X: m.X, Y: ymax}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = color.Gray{0x60}, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: m.X, Y: ymax}}, Labels: []string{m.Label}})
		if err != nil {
			return err
		}
		lb.Offset = vg.Point{X: vg.Points(3), Y: vg.Points(-10)}
		p.Add(lb)
	}
	// Headroom above the data for the legend, which is drawn inside the
	// plot at the top.
	if c.LogY { // a log axis needs a positive range, whatever was drawn
		p.Y.Min, p.Y.Max = ymin, max(ymax, ymin*10)*6
	} else if len(c.Lines) > 0 && p.Y.Max > p.Y.Min {
		p.Y.Max += (p.Y.Max - p.Y.Min) * 0.08 * float64(len(c.Lines))
	}
	return nil
}

func (c Chart) bars(p *plot.Plot) error {
	n := len(c.Bars.Series)
	width := vg.Points(math.Min(40, 420/float64(max(1, n*len(c.Bars.Groups)))))
	top := 0.0
	for _, s := range c.Bars.Series {
		for _, v := range s.Values {
			if finite(v) {
				top = max(top, v)
			}
		}
	}
	for i, s := range c.Bars.Series {
		vals := make(plotter.Values, len(s.Values))
		var at plotter.XYs
		var labels []string
		var word []bool // the label is a missing bar's word, not a value
		for j, v := range s.Values {
			if finite(v) {
				vals[j] = v
				at = append(at, plotter.XY{X: float64(j), Y: v})
				labels, word = append(labels, fmt.Sprintf("%.2f", v)), append(word, false)
				continue
			}
			if j < len(s.Missing) && s.Missing[j] != "" {
				at = append(at, plotter.XY{X: float64(j), Y: top * 0.02})
				labels, word = append(labels, s.Missing[j]), append(word, true)
			}
		}
		b, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		b.Color, b.LineStyle.Width = Colour(i), 0
		b.Offset = vg.Length(float64(i)-float64(n-1)/2) * width
		p.Add(b)
		p.Legend.Add(s.Name, b)
		if len(at) == 0 {
			continue
		}
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: labels})
		if err != nil {
			return err
		}
		for k := range lb.TextStyle {
			lb.TextStyle[k].XAlign, lb.TextStyle[k].Font.Size = text.XCenter, vg.Points(8)
			if word[k] { // written upright where the bar would stand
				lb.TextStyle[k].Rotation = math.Pi / 2
				lb.TextStyle[k].XAlign = draw.XLeft
			}
		}
		lb.Offset = vg.Point{X: b.Offset, Y: vg.Points(2)}
		p.Add(lb)
	}
	p.NominalX(c.Bars.Groups...)
	p.Y.Min = 0
	p.Y.Max = top * (1.15 + 0.09*float64(n)) // headroom for the legend
	if top == 0 {
		p.Y.Max = 1
	}
	return nil
}
