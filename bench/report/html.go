package report

import (
	"bytes"
	"html/template"
	"strings"
	"time"
)

// figure is a chart as the page shows it.
type figure struct {
	Chart
	SVG template.HTML
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: "Liberation Sans", Arial, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; }
h2 { font-size: 1.15em; margin-top: 2em; }
.meta { color: #666; }
figure { margin: 1em 0; }
figure svg { width: 100%; height: auto; }
figcaption { color: #444; font-size: 0.9em; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 0.85em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">{{.Started}}{{if .Server}} · {{.Server}}{{end}} · raw results: <a href="{{.Name}}.json">{{.Name}}.json</a></p>
{{range .Figures}}<figure class="chart">
{{.SVG}}
{{if .Note}}<figcaption>{{.Note}}</figcaption>{{end}}
</figure>
{{end}}<h2>Summary</h2>
<pre>{{.Text}}</pre>
</body>
</html>
`))

// HTML renders the self-contained page: the title, when and where it ran,
// every chart inline, then the text summary.
func (r Report) HTML() ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	data := struct {
		Report
		Started string
		Figures []figure
	}{Report: r, Started: r.Started.UTC().Format(time.RFC3339)}
	for _, c := range r.Charts {
		svg, err := c.SVG()
		if err != nil {
			return nil, err
		}
		data.Figures = append(data.Figures, figure{c, template.HTML(inline(svg))})
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// inline makes an SVG document an element of the page: without its XML
// declaration (its viewBox lets the page's style scale it).
func inline(svg []byte) string {
	s := string(svg)
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return s
}
