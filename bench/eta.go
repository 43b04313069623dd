package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sluicedb/sluice/internal/control"
)

// How honest sluice's ETA is: while sluice copies, the bench reads its
// status through the control socket (sluice ctl status) and, once the copy
// is over, compares the ETA given at a quarter and at half of the rows with
// the time the copy really took from there.

// etaSample is one status read.
type etaSample struct {
	at               time.Time
	phase            string
	rows, est        int64
	eta              time.Duration
	paused, throttle bool
}

// watchETA reads the status on socket every 100ms until ctx is done, and
// returns the samples through the channel when it stops.
func watchETA(ctx context.Context, socket string) <-chan []etaSample {
	out := make(chan []etaSample, 1)
	go func() {
		var samples []etaSample
		defer func() { out <- samples }()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			r, err := control.Send(sctx, socket, "status")
			cancel()
			if err != nil || !r.OK {
				continue // not listening yet, or gone
			}
			var st struct {
				Phase    string  `json:"phase"`
				Rows     int64   `json:"rows_copied"`
				Est      int64   `json:"rows_estimated"`
				ETA      float64 `json:"eta_seconds"`
				Paused   bool    `json:"paused"`
				Throttle string  `json:"throttle"`
			}
			if json.Unmarshal(r.Status, &st) != nil {
				continue
			}
			samples = append(samples, etaSample{at: time.Now(), phase: st.Phase, rows: st.Rows, est: st.Est,
				eta: time.Duration(st.ETA * float64(time.Second)), paused: st.Paused, throttle: st.Throttle != ""})
		}
	}()
	return out
}

// etaErrors returns the ETA's error at the first samples past a quarter and
// half of the estimated rows, as a fraction of the copy's real remaining
// time (+0.2: the ETA said 20% more than it took). ok is false when the
// samples do not hold a copy from before a quarter to its end.
func etaErrors(samples []etaSample) (quarter, half float64, ok bool) {
	var end time.Time
	copying := false
	for _, s := range samples {
		if s.phase == "copy" {
			copying = true
		} else if copying {
			end = s.at
			break
		}
	}
	if end.IsZero() {
		return 0, 0, false
	}
	at := func(frac float64) (float64, bool) {
		for _, s := range samples {
			if s.phase != "copy" || s.est <= 0 || float64(s.rows) < frac*float64(s.est) {
				continue
			}
			real := end.Sub(s.at)
			if real <= 0 || s.eta <= 0 {
				return 0, false
			}
			return (s.eta.Seconds() - real.Seconds()) / real.Seconds(), true
		}
		return 0, false
	}
	var ok1, ok2 bool
	quarter, ok1 = at(0.25)
	half, ok2 = at(0.5)
	return quarter, half, ok1 && ok2
}

// reportETA prints the ETA errors of the sluice runs that measured them.
func reportETA(w io.Writer, rs []result) {
	head := false
	for _, r := range rs {
		if r.eta == nil {
			continue
		}
		if !head {
			fmt.Fprintln(w, "\nsluice's copy ETA (sluice ctl status) against the copy's real end, as an error of the time left (target within 20%):")
			head = true
		}
		mark := func(e float64) string {
			s := fmt.Sprintf("%+.0f%%", e*100)
			if math.Abs(e) > 0.2 {
				s += " (over 20%)"
			}
			return s
		}
		fmt.Fprintf(w, "  %-40s %-9s at 1/4 of the rows %s, at 1/2 %s\n", r.name, r.load, mark(r.eta[0]), mark(r.eta[1]))
	}
}
