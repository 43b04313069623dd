package report

import (
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// browser finds a headless Chromium: $SLUICE_TEST_BROWSER, or one on PATH
// (scripts/browser.sh installs Debian's chromium-headless-shell, and make
// test sets the variable). Without one the test skips, saying so, unless
// $SLUICE_TEST_REQUIRE_BROWSER is set.
func browser(t *testing.T) string {
	if b := os.Getenv("SLUICE_TEST_BROWSER"); b != "" {
		return b
	}
	for _, name := range []string{"chromium-headless-shell", "chromium", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SLUICE_TEST_REQUIRE_BROWSER") != "" {
		t.Fatal("no headless browser: run scripts/browser.sh or set SLUICE_TEST_BROWSER")
	}
	t.Skip("no headless browser (scripts/browser.sh installs one)")
	return ""
}

func headless(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return out
}

// TestReportInABrowser opens a written report in a real headless browser:
// the page it builds holds a figure with an SVG for every chart, and the
// screenshot shows every series' colour, in more than a sliver of pixels,
// on a page that is not blank.
func TestReportInABrowser(t *testing.T) {
	bin := browser(t)
	dir := t.TempDir()
	r := sample()
	if _, err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	url := "file://" + filepath.Join(dir, "sample.html")

	dom := string(headless(t, bin, "--dump-dom", url))
	if n := strings.Count(dom, "<figure"); n != len(r.Charts) {
		t.Errorf("the browser's page has %d figures, want %d", n, len(r.Charts))
	}
	if n := strings.Count(dom, "<svg"); n != len(r.Charts) {
		t.Errorf("the browser's page has %d SVGs, want %d", n, len(r.Charts))
	}

	shot := filepath.Join(dir, "shot.png")
	headless(t, bin, "--screenshot="+shot, "--window-size=1200,1500", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 3)
	white := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 > 0xF0 && g>>8 > 0xF0 && bl>>8 > 0xF0 {
				white++
			}
			for i := range counts {
				c := Colour(i)
				if near(r>>8, c.R) && near(g>>8, c.G) && near(bl>>8, c.B) {
					counts[i]++
				}
			}
		}
	}
	total := b.Dx() * b.Dy()
	t.Logf("screenshot %dx%d: series pixels %v, white %d", b.Dx(), b.Dy(), counts, white)
	for i, n := range counts {
		if n < 500 {
			t.Errorf("series colour %s shows in %d pixels of the screenshot", hex(i), n)
		}
	}
	if white > total*97/100 {
		t.Errorf("the screenshot is %d%% white", white*100/total)
	}
}

func near(v uint32, want uint8) bool {
	d := int(v) - int(want)
	return d > -12 && d < 12
}
