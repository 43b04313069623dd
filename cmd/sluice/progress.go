package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/sluicedb/sluice/migration"
)

// useBar says whether --progress-style asks for the live bar: auto draws it
// when stderr is a terminal and logs are text.
func useBar(style, logFormat string, quiet bool, stderr io.Writer) (bool, error) {
	switch style {
	case "bar":
		return true, nil
	case "lines":
		return false, nil
	case "auto":
		f, ok := stderr.(*os.File)
		return ok && term.IsTerminal(int(f.Fd())) && logFormat == "text" && !quiet, nil
	}
	return false, fmt.Errorf("--progress-style %q: use auto, bar or lines", style)
}

// bar is the live progress bar of one run. Log lines pass through it: the
// bar is cleared before each line and drawn again after it, so that the two
// never overwrite each other.
type bar struct {
	mu     sync.Mutex
	w      io.Writer
	bar    *progressbar.ProgressBar
	cancel context.CancelFunc // set by start
	done   chan struct{}      // closed when follow returns
}

// start draws the run's status until stop.
func (b *bar) start(ctx context.Context, status func() migration.Status) {
	ctx, cancel := context.WithCancel(ctx)
	b.mu.Lock()
	b.cancel, b.done = cancel, make(chan struct{})
	done := b.done
	b.mu.Unlock()
	go func() {
		defer close(done)
		b.follow(ctx, status)
	}()
}

// stop erases the bar and waits until it is no longer drawn.
func (b *bar) stop() {
	b.mu.Lock()
	cancel, done := b.cancel, b.done
	b.cancel = nil
	b.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func newBar(w io.Writer) *bar {
	// A known length (set from the status) and no spinner: the library's
	// spinner redraws from a goroutine of its own, outside any lock.
	return &bar{w: w, bar: progressbar.NewOptions64(1,
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetItsString("rows"),
		progressbar.OptionShowIts(),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetRenderBlankState(false),
	)}
}

// Write writes a log line above the bar.
func (b *bar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar.Clear()
	return b.w.Write(p)
}

// describe is the bar's text: phase, ETA of the copy, backlog, lag and
// pauses (rows and rate are the bar's own).
func describe(s migration.Status) string {
	parts := []string{s.Phase}
	if s.ETA > 0 {
		parts = append(parts, "ETA "+s.ETA.Round(time.Second).String())
	}
	parts = append(parts, fmt.Sprintf("backlog %d", s.Backlog))
	if s.ReplicaLagKnown {
		parts = append(parts, "lag "+s.ReplicaLag.Round(10*time.Millisecond).String())
	}
	switch {
	case s.Paused:
		parts = append(parts, "PAUSED (sluice ctl resume)")
	case s.Throttle != "":
		parts = append(parts, "throttled: "+s.Throttle)
	}
	return strings.Join(parts, " | ")
}

// follow draws status every 250ms until ctx is done.
func (b *bar) follow(ctx context.Context, status func() migration.Status) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	max := int64(-1)
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			b.bar.Clear()
			b.mu.Unlock()
			return
		case <-t.C:
		}
		s := status()
		if s.RowsEstimated <= 0 {
			continue
		}
		b.mu.Lock()
		b.bar.Describe(describe(s))
		// The estimate is often low: while the copy runs the bar stays
		// short of its end (the library ends a bar that reaches it).
		n := max64(s.RowsEstimated, s.RowsCopied)
		if s.Phase == "copy" {
			n = max64(s.RowsEstimated, s.RowsCopied+1)
		}
		if n != max {
			max = n
			b.bar.ChangeMax64(n)
		}
		b.bar.Set64(s.RowsCopied)
		b.mu.Unlock()
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// dropProgress is a log handler that leaves out the periodic progress
// lines, which the bar shows instead.
type dropProgress struct{ slog.Handler }

func (h dropProgress) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "progress" {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h dropProgress) WithAttrs(as []slog.Attr) slog.Handler {
	return dropProgress{h.Handler.WithAttrs(as)}
}

func (h dropProgress) WithGroup(name string) slog.Handler {
	return dropProgress{h.Handler.WithGroup(name)}
}
