package report

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sample is a report of a line chart (two tools' throughput, one of which
// stalls) and a bar chart with a run that did not finish.
func sample() Report {
	var xs, flowing, stalled []float64
	for i := range 60 {
		xs = append(xs, float64(i))
		flowing = append(flowing, 400+20*math.Sin(float64(i)/3))
		v := 400.0
		if i > 20 && i < 40 {
			v = 0
		}
		stalled = append(stalled, v)
	}
	return Report{Name: "sample", Title: "a sample", Started: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), Server: "MySQL 9.7.0",
		Text: "tool  x F\nsluice  1.70 <&>\n",
		Charts: []Chart{
			{Title: "throughput", X: "seconds", Y: "tps", Lines: []Series{{Name: "sluice", X: xs, Y: flowing}, {Name: "native", X: xs, Y: stalled}},
				Marks: []Mark{{X: 10, Label: "ALTER starts"}}},
			{Title: "time", X: "load", Y: "x F", Bars: &Bars{Groups: []string{"idle", "40% load", "unthrottled"}, Series: []BarSeries{
				{Name: "native", Values: []float64{1.9, 2.2, 3.3}},
				{Name: "sluice", Values: []float64{1.7, 3.5, 3.9}},
				{Name: "gh-ost", Values: []float64{2.5, 4.1, math.NaN()}, Missing: []string{"", "", "did not finish"}},
			}}, Note: "medians of three runs"},
		}}
}

// hex is how the SVG spells series i's colour.
func hex(i int) string {
	c := Colour(i)
	return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B)
}

func TestWriteThreeFiles(t *testing.T) {
	dir := t.TempDir()
	r := sample()
	paths, err := r.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 5 || !strings.HasSuffix(paths[4], "sample.html") || !strings.HasSuffix(paths[3], "sample-2.svg") {
		t.Fatalf("wrote %v", paths)
	}
	if svg, _ := os.ReadFile(filepath.Join(dir, "sample-1.svg")); !strings.Contains(string(svg), "stroke:"+hex(1)) {
		t.Errorf("sample-1.svg does not draw the throughput chart's second line")
	}
	page, _ := os.ReadFile(filepath.Join(dir, "sample.html"))
	html := string(page)
	if n := strings.Count(html, "<svg"); n != 2 {
		t.Errorf("%d <svg> in the page, want one per chart (2)", n)
	}
	if strings.Contains(html, "<?xml") {
		t.Error("the page holds an XML declaration: the SVG was not inlined")
	}
	// Every series is drawn in its colour: lines as strokes, bars as fills.
	for i := range 2 {
		if !strings.Contains(html, "stroke:"+hex(i)) {
			t.Errorf("line series %d (%s) not drawn", i, hex(i))
		}
	}
	for i := range 3 {
		if !strings.Contains(html, "fill:"+hex(i)) {
			t.Errorf("bar series %d (%s) not drawn", i, hex(i))
		}
	}
	for _, w := range []string{"did not finish", "ALTER starts", "medians of three runs", "sluice  1.70 &lt;&amp;&gt;", `href="sample.json"`} {
		if !strings.Contains(html, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if strings.Contains(html, "<&>") {
		t.Error("the summary's text is not escaped")
	}
	txt, _ := os.ReadFile(filepath.Join(dir, "sample.txt"))
	if string(txt) != r.Text {
		t.Errorf("text summary %q, want %q", txt, r.Text)
	}

	// JSON has no NaN: the missing bar is a null, the others their values.
	raw, _ := os.ReadFile(filepath.Join(dir, "sample.json"))
	var back struct {
		Name   string
		Charts []struct {
			Lines []Series
			Bars  *struct {
				Series []struct {
					Name   string
					Values []*float64
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("the JSON does not read back: %v", err)
	}
	if back.Name != "sample" || len(back.Charts) != 2 || len(back.Charts[0].Lines) != 2 || len(back.Charts[0].Lines[1].Y) != 60 {
		t.Fatalf("JSON read back: %+v", back)
	}
	gh := back.Charts[1].Bars.Series[2]
	if gh.Name != "gh-ost" || gh.Values[2] != nil || gh.Values[0] == nil || *gh.Values[0] != 2.5 {
		t.Errorf("gh-ost's bars in JSON: %+v", gh)
	}
	if back.Charts[0].Lines[1].Y[30] != 0 || back.Charts[0].Lines[1].Y[10] != 400 {
		t.Errorf("the stalled line read back wrong: %v", back.Charts[0].Lines[1].Y)
	}
}

// TestRefusesWhatCannotBeDrawn: a bad report writes no file.
func TestRefusesWhatCannotBeDrawn(t *testing.T) {
	bad := map[string]func(*Report){
		"name with a slash":    func(r *Report) { r.Name = "../x" },
		"empty name":           func(r *Report) { r.Name = "" },
		"lines and bars":       func(r *Report) { r.Charts[1].Lines = r.Charts[0].Lines },
		"neither":              func(r *Report) { r.Charts[0].Lines = nil },
		"X and Y differ":       func(r *Report) { r.Charts[0].Lines[0].Y = r.Charts[0].Lines[0].Y[1:] },
		"NaN on a line":        func(r *Report) { r.Charts[0].Lines[0].Y[3] = math.NaN() },
		"a bar short":          func(r *Report) { r.Charts[1].Bars.Series[0].Values = []float64{1} },
		"bars without a group": func(r *Report) { r.Charts[1].Bars.Groups = nil },
	}
	for name, spoil := range bad {
		t.Run(name, func(t *testing.T) {
			r := sample()
			spoil(&r)
			dir := filepath.Join(t.TempDir(), "out")
			if _, err := r.Write(dir); err == nil {
				t.Fatal("written")
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the refusal left %s: %v", dir, err)
			}
		})
	}
}

// TestGeneratedChartsDraw: random series (empty, flat, one point, negative,
// huge) and bars (all missing, all zero) draw without error, and every
// series with a point shows in its colour. The seed is printed.
func TestGeneratedChartsDraw(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 40 {
		var lines []Series
		for s := range 1 + rng.IntN(5) {
			n := rng.IntN(4) * rng.IntN(30) // often none or few
			scale := math.Pow(10, float64(rng.IntN(12)-3))
			var x, y []float64
			for i := range n {
				x = append(x, float64(i))
				y = append(y, (rng.Float64()-0.3)*scale)
				if rng.IntN(5) == 0 {
					y[i] = 0
				}
			}
			lines = append(lines, Series{Name: fmt.Sprintf("s%d", s), X: x, Y: y, Dots: rng.IntN(3) == 0})
		}
		c := Chart{Title: "lines", X: "x", Y: "y", Lines: lines, LogY: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			floor := float64(rng.IntN(3) - 1)
			c.YFloor = &floor
		}
		svg, err := c.SVG()
		if err != nil {
			t.Fatalf("round %d (seed %d): %v", round, seed, err)
		}
		for i, s := range lines {
			positive := slices.ContainsFunc(s.Y, func(v float64) bool { return v > 0 })
			drawn := "stroke:" + hex(i)
			if s.Dots {
				drawn = "fill:" + hex(i)
			}
			if (positive || len(s.X) > 0 && !c.LogY) && !strings.Contains(string(svg), drawn) {
				t.Errorf("round %d (seed %d): series %d with %d points not drawn", round, seed, i, len(s.X))
			}
		}
		groups := []string{"a", "b", "c"}[:1+rng.IntN(3)]
		var bars []BarSeries
		for s := range 1 + rng.IntN(4) {
			var v []float64
			for range groups {
				switch rng.IntN(4) {
				case 0:
					v = append(v, math.NaN())
				case 1:
					v = append(v, 0)
				default:
					v = append(v, rng.Float64()*10)
				}
			}
			bars = append(bars, BarSeries{Name: fmt.Sprintf("b%d", s), Values: v, Missing: []string{"failed", "", "x"}})
		}
		if _, err := (Chart{Title: "bars", Bars: &Bars{Groups: groups, Series: bars}}).SVG(); err != nil {
			t.Fatalf("round %d (seed %d): bars %+v: %v", round, seed, bars, err)
		}
	}
}

// TestUndrawableIsAnError: data past the plotting library's floats, or a
// floor that is not a number, is an error, never a panic or a hang.
func TestUndrawableIsAnError(t *testing.T) {
	nan := math.NaN()
	for name, c := range map[string]Chart{
		"a huge flat line":     {Title: "x", Lines: []Series{{Name: "a", X: []float64{1e16}, Y: []float64{1e16}}}},
		"a huge log line":      {Title: "x", LogY: true, Lines: []Series{{Name: "a", X: []float64{0, 1}, Y: []float64{1, 1e308}}}},
		"a floor not a number": {Title: "x", YFloor: &nan, Lines: []Series{{Name: "a", X: []float64{0, 1}, Y: []float64{1, 2}}}},
	} {
		svg, err := c.SVG() // a panic fails the test
		if name == "a floor not a number" && err == nil {
			t.Errorf("%s: drawn", name)
		}
		if err == nil && len(svg) == 0 {
			t.Errorf("%s: neither drawn nor refused", name)
		}
	}
}
