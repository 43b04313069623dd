// Package report writes what one benchmark measured, side by side in one
// directory: the raw results as JSON (<name>.json), the text summary the
// benchmark printed (<name>.txt), a self-contained HTML page (<name>.html)
// whose charts are inline SVG drawn by gonum/plot, so that the page needs no
// network and no script to be read, and each chart alone (<name>-N.svg).
//
// It knows nothing of how a benchmark ran: a benchmark hands it a Report,
// its figures already measured.
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Report is one benchmark's results.
type Report struct {
	// Name is the files' stem: letters, digits, '-' and '_'.
	Name  string `json:"name"`
	Title string `json:"title"`
	// Started is when the benchmark began; Server what it ran against.
	Started time.Time `json:"started"`
	Server  string    `json:"server,omitempty"`
	// Text is the summary as the benchmark printed it.
	Text   string  `json:"text"`
	Charts []Chart `json:"charts"`
	// Raw is the benchmark's own results, written as they marshal.
	Raw any `json:"raw,omitempty"`
}

// Chart is one figure: a line chart (Lines, with Marks across it) or a
// grouped bar chart (Bars), never both.
type Chart struct {
	Title  string   `json:"title"`
	X      string   `json:"x"` // the axes' labels
	Y      string   `json:"y"`
	Lines  []Series `json:"lines,omitempty"`
	Marks  []Mark   `json:"marks,omitempty"`
	Bars   *Bars    `json:"bars,omitempty"`
	Note   string   `json:"note,omitempty"`   // a caption under the figure
	YFloor *float64 `json:"yfloor,omitempty"` // the Y axis starts here (nil: at the data's lowest, or 0 for bars)
	// LogY draws a line chart's Y axis on a log scale; points at or
	// below zero are left out.
	LogY bool `json:"logy,omitempty"`
}

// Series is one line: Y[i] at X[i].
type Series struct {
	Name string    `json:"name"`
	X    []float64 `json:"x"`
	Y    []float64 `json:"y"`
	// Dots draws the points alone, unjoined (one point a setting).
	Dots bool `json:"dots,omitempty"`
}

// Mark is a labelled vertical line across a line chart (an ALTER's start).
type Mark struct {
	X     float64 `json:"x"`
	Label string  `json:"label"`
}

// Bars is a grouped bar chart: along the X axis one group per Groups entry
// (a load level), in each group one bar per series (a tool).
type Bars struct {
	Groups []string    `json:"groups"`
	Series []BarSeries `json:"series"`
}

// BarSeries is one tool's bars, Values[i] in group i. A NaN value is a run
// that has no figure (it failed or did not finish): no bar is drawn and
// Missing[i], if set, is written where it would stand.
type BarSeries struct {
	Name    string    `json:"name"`
	Values  []float64 `json:"values"`
	Missing []string  `json:"missing,omitempty"`
}

var stem = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Write writes dir/<Name>.json, .txt, -N.svg and .html, creating dir, and
// returns the paths written, the page last. It fails, writing nothing, on a Report that cannot be
// drawn: a bad name, a chart with both lines and bars or with neither, a
// series whose X and Y differ in length.
func (r Report) Write(dir string) ([]string, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	page, err := r.HTML()
	if err != nil {
		return nil, err
	}
	raw, err := json.MarshalIndent(jsonSafe(r), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", r.Name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	type file struct {
		ext  string
		data []byte
	}
	files := []file{{".json", raw}, {".txt", []byte(r.Text)}}
	for i, c := range r.Charts { // each chart alone too, to embed elsewhere
		svg, err := c.SVG()
		if err != nil {
			return nil, err
		}
		files = append(files, file{fmt.Sprintf("-%d.svg", i+1), svg})
	}
	files = append(files, file{".html", page})
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, r.Name+f.ext)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func (r Report) check() error {
	if !stem.MatchString(r.Name) {
		return fmt.Errorf("report name %q: use letters, digits, '-' and '_'", r.Name)
	}
	for _, c := range r.Charts {
		if err := c.check(); err != nil {
			return fmt.Errorf("report %s: %w", r.Name, err)
		}
	}
	return nil
}

func (c Chart) check() error {
	if (c.Bars == nil) == (len(c.Lines) == 0) {
		return fmt.Errorf("chart %q: give lines or bars, one of the two", c.Title)
	}
	if c.YFloor != nil && !finite(*c.YFloor) {
		return fmt.Errorf("chart %q: the Y floor is not a number", c.Title)
	}
	for _, m := range c.Marks {
		if !finite(m.X) {
			return fmt.Errorf("chart %q: mark %q is not at a number", c.Title, m.Label)
		}
	}
	for _, s := range c.Lines {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("chart %q: series %q has %d X and %d Y", c.Title, s.Name, len(s.X), len(s.Y))
		}
		for i := range s.X {
			if !finite(s.X[i]) || !finite(s.Y[i]) {
				return fmt.Errorf("chart %q: series %q has a point that is not a number at %d", c.Title, s.Name, i)
			}
		}
	}
	if c.Bars != nil {
		if len(c.Bars.Groups) == 0 {
			return fmt.Errorf("chart %q: bars without groups", c.Title)
		}
		for _, s := range c.Bars.Series {
			if len(s.Values) != len(c.Bars.Groups) {
				return fmt.Errorf("chart %q: bar series %q has %d values for %d groups", c.Title, s.Name, len(s.Values), len(c.Bars.Groups))
			}
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// jsonSafe returns r with every NaN of its bars as null-able: JSON has no
// NaN, so a missing bar is written as null (a *float64).
func jsonSafe(r Report) any {
	type barsOut struct {
		Name    string     `json:"name"`
		Values  []*float64 `json:"values"`
		Missing []string   `json:"missing,omitempty"`
	}
	type chartOut struct {
		Chart
		Bars *struct {
			Groups []string  `json:"groups"`
			Series []barsOut `json:"series"`
		} `json:"bars,omitempty"`
	}
	out := struct {
		Report
		Charts []chartOut `json:"charts"`
	}{Report: r}
	for _, c := range r.Charts {
		co := chartOut{Chart: c}
		if c.Bars != nil {
			co.Bars = &struct {
				Groups []string  `json:"groups"`
				Series []barsOut `json:"series"`
			}{Groups: c.Bars.Groups}
			for _, s := range c.Bars.Series {
				bo := barsOut{Name: s.Name, Missing: s.Missing}
				for _, v := range s.Values {
					if !finite(v) {
						bo.Values = append(bo.Values, nil)
					} else {
						bo.Values = append(bo.Values, &v)
					}
				}
				co.Bars.Series = append(co.Bars.Series, bo)
			}
		}
		out.Charts = append(out.Charts, co)
	}
	return out
}
