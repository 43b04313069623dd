package bench

import (
	"strings"
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	tps := []float64{100, 100, 50, 0, 0, 80, 100}
	w := window(tps, 2*time.Second, 5500*time.Millisecond)
	// seconds 3..6 (indexes 2..5): 50, 0, 0, 80
	if w.Seconds != 4 || w.Mean != 32.5 || w.Min != 0 || w.MinAt != 3 || w.Zero != 2 {
		t.Errorf("got %+v", w)
	}
	if w := window(tps, 10*time.Second, 12*time.Second); w.Seconds != 0 || w.Mean != 0 {
		t.Errorf("empty window: %+v", w)
	}
}

func TestPhaseTimes(t *testing.T) {
	log := `time=x level=INFO msg="phase done" phase=preflight took=11ms
time=x level=INFO msg="phase done" phase=copy took=3.983s
time=x level=INFO msg="phase done" phase=checksum took=1.46s`
	if got := phaseTimes(log); got != "copy 4.0, checksum 1.5" {
		t.Errorf("got %q", got)
	}
}

// TestPhaseSpans: the load's lowest second is matched to the sluice phases
// running in it.
func TestPhaseSpans(t *testing.T) {
	log := `time=2026-11-22T01:30:17.385Z level=INFO msg="phase start" phase=copy
time=2026-11-22T01:30:17.390Z level=INFO msg=progress phase=copy
time=2026-11-22T01:30:20.100Z level=INFO msg="phase done" phase=copy took=2.715s
time=2026-11-22T01:30:20.100Z level=INFO msg="phase start" phase=catch-up
time=2026-11-22T01:30:20.400Z level=INFO msg="phase done" phase=catch-up took=300ms
time=2026-11-22T01:30:20.400Z level=INFO msg="phase start" phase=cut-over
time=2026-11-22T01:30:20.600Z level=INFO msg="phase done" phase=cut-over took=200ms`
	spans := phaseSpans(log)
	if len(spans) != 3 || spans[1].name != "catch-up" || spans[1].to.Sub(spans[1].from) != 300*time.Millisecond {
		t.Fatalf("spans = %+v", spans)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	if got := strings.Join(phasesIn(spans, at("2026-11-22T01:30:19.900Z"), at("2026-11-22T01:30:20.900Z")), "/"); got != "copy/catch-up/cut-over" {
		t.Errorf("phases in the second = %q", got)
	}
	if got := phasesIn(spans, at("2026-11-22T01:30:18Z"), at("2026-11-22T01:30:19Z")); len(got) != 1 || got[0] != "copy" {
		t.Errorf("phases in the second = %q", got)
	}
	if got := phasesIn(spans, at("2026-11-22T01:30:30Z"), at("2026-11-22T01:30:31Z")); !strings.HasPrefix(got[0], "no phase") {
		t.Errorf("phases after the run = %q", got)
	}
}

func TestSummarize(t *testing.T) {
	s := time.Second
	rs := []result{
		{name: "F", load: "idle", wall: 4 * s},
		{name: "sluice", load: "load", wall: 9 * s, rssMB: 20,
			before: Window{Mean: 100, Seconds: 10, Errors: 2}, during: Window{Mean: 90, Min: 50, Zero: 0, Seconds: 9, Errors: 3}},
		{name: "F", load: "idle", wall: 2 * s},
		{name: "sluice", load: "load", wall: 7 * s, rssMB: 25,
			before: Window{Mean: 110, Seconds: 10, Errors: 0}, during: Window{Mean: 100, Min: 40, Zero: 1, Seconds: 7, Errors: 1}},
		{name: "F", load: "idle", wall: 3 * s},
		{name: "sluice", load: "load", wall: 8 * s, failure: "boom",
			before: Window{Mean: 90, Seconds: 10}, during: Window{Mean: 80, Min: 60, Seconds: 8}},
	}
	ss := summarize(rs)
	if len(ss) != 2 || ss[0].name != "F" || ss[1].name != "sluice" {
		t.Fatalf("groups: %+v", ss)
	}
	if ss[0].wall != 3*s || ss[0].lo != 2*s || ss[0].hi != 4*s {
		t.Errorf("F: median %s, range %s-%s", ss[0].wall, ss[0].lo, ss[0].hi)
	}
	l := ss[1]
	if l.wall != 8*s || l.during.Min != 40 || l.during.Zero != 1 || l.rssMB != 25 || len(l.failures) != 1 {
		t.Errorf("sluice: %+v", l)
	}
	if l.before.Mean < 99.9 || l.before.Mean > 100.1 || l.during.Mean < 89.9 || l.during.Mean > 90.1 {
		t.Errorf("means: before %.2f during %.2f", l.before.Mean, l.during.Mean)
	}
	// 2 errors in 30 s before: 4 a minute; 4 in 24 s during: 10 a minute.
	if l.errBefore != 4 || l.errDuring != 10 {
		t.Errorf("errors a minute: before %.2f, during %.2f", l.errBefore, l.errDuring)
	}
	if got := median([]time.Duration{1 * s, 2 * s, 4 * s, 9 * s}); got != 3*s {
		t.Errorf("median of four: %s", got)
	}
}

func TestDeadlockSection(t *testing.T) {
	status := "=====\nBACKGROUND THREAD\n-----\nsrv_master_thread\n------------------------\nLATEST DETECTED DEADLOCK\n------------------------\n2026-11-21 17:00:01 0x7f\n*** (1) TRANSACTION:\nINSERT INTO `sbtest`.`_sbtest1_new` SELECT ... FOR SHARE NOWAIT\n*** (2) TRANSACTION:\nDELETE FROM sbtest1 WHERE id=5\n------------\nTRANSACTIONS\n------------\nTrx id counter 5\n"
	s := deadlockSection(status)
	if !strings.Contains(s, "2026-11-21 17:00:01") || strings.Contains(s, "Trx id counter") || strings.Contains(s, "srv_master_thread") {
		t.Fatalf("section %q", s)
	}
	if !involves(s, []string{"_sbtest1_new`", "FOR SHARE"}) || involves(s, []string{"_sbtest1_old"}) {
		t.Error("involves")
	}
	if deadlockSection("no deadlock here") != "" {
		t.Error("a status without a deadlock gave a section")
	}
}

// TestPairedRatios: each run is read against the F of its own round, so a
// host that slows down between rounds does not inflate the ratios; a failed
// run counts in neither the time nor the ratio.
func TestPairedRatios(t *testing.T) {
	s := time.Second
	const fName = "native ALTER ENGINE=InnoDB (in-place rebuild)"
	rs := []result{
		{name: fName, load: "idle", wall: 4 * s, f: 4 * s},
		{name: "sluice", load: "load", wall: 8 * s, f: 4 * s},
		{name: fName, load: "idle", wall: 6 * s, f: 6 * s},
		{name: "sluice", load: "load", wall: 18 * s, f: 6 * s},
		{name: fName, load: "idle", wall: 5 * s, f: 5 * s},
		{name: "sluice", load: "load", wall: 1 * s, f: 5 * s, failure: "boom"},
	}
	ss := summarize(rs)
	l := ss[1]
	if l.x != 2.5 || l.xlo != 2 || l.xhi != 3 {
		t.Errorf("paired ratios %.2f (%.2f-%.2f), want 2.50 (2.00-3.00)", l.x, l.xlo, l.xhi)
	}
	if l.wall != 13*s || l.lo != 8*s || l.hi != 18*s {
		t.Errorf("times %s (%s-%s): the failed run counted", l.wall, l.lo, l.hi)
	}
	var b strings.Builder
	report(&b, rs, 1000, 100, 8)
	var fRow, row string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "sluice  ") && row == "" {
			row = line
		}
		if strings.HasPrefix(line, fName) {
			fRow = line
		}
	}
	// The sluice row is paired (13 s over the median F of 5 s would be 2.60);
	// F's own row is each F over the median F.
	if !strings.Contains(row, "2.50 (2.00-3.00)") {
		t.Errorf("sluice row %q", row)
	}
	if !strings.Contains(fRow, "1.00 (0.80-1.20)") {
		t.Errorf("F row %q", fRow)
	}
	if missing := pairedRatiosOf([]result{{wall: s}}); missing {
		t.Error("a run without F gave a paired ratio")
	}
}

func pairedRatiosOf(rs []result) bool {
	m, _, _ := pairedRatios(rs)
	return m != 0
}

// TestReportVariantsAndFailures: a variant is its own row; a failure is
// reported after the table, so it does not widen the table's first column.
func TestReportVariantsAndFailures(t *testing.T) {
	rs := []result{
		{name: "native ALTER ENGINE=InnoDB (in-place rebuild)", load: "idle", wall: 4 * time.Second},
		{name: "sluice MODIFY k BIGINT", load: "idle", wall: 6 * time.Second, phases: "copy 4.0"},
		{name: "sluice MODIFY k BIGINT --threads=4", load: "idle", wall: 8 * time.Second, phases: "copy 6.0"},
		{name: "sluice MODIFY k BIGINT --threads=4", load: "idle", failure: strings.Repeat("x", 300)},
	}
	var b strings.Builder
	report(&b, rs, 1000, 0, 8)
	out := b.String()
	lines := strings.Split(out, "\n")
	var variant, failed string
	for _, l := range lines {
		if strings.HasPrefix(l, "sluice MODIFY k BIGINT --threads=4 ") {
			variant = l
		}
		if strings.HasPrefix(l, "FAILED: ") {
			failed = l
		}
	}
	if !strings.Contains(variant, "2.00 (2.00-2.00)") {
		t.Errorf("variant row %q: want 2.00 x F (8s / 4s), the median of its successful run", variant)
	}
	if !strings.Contains(failed, "--threads=4 (idle)") {
		t.Errorf("failure line %q", failed)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "sluice MODIFY k BIGINT ") && len(l) > 250 {
			t.Errorf("a table row is %d characters wide: the failure widened the table", len(l))
		}
	}
}
