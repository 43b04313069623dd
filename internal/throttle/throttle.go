// Package throttle pauses sluice's copy while the server is loaded or the
// operator asks for a pause, and stops the migration when the load is
// critical or the operator asks for that.
//
// The signals are the ones DBAs already use with the peers:
//   - max-load: global status ceilings ("Threads_running=25,Threads_connected=500");
//     while any is reached, the copy pauses between chunks;
//   - critical-load: ceilings that stop the migration (cleanly: the original
//     is untouched and the shadow dropped) when reached on two checks in a row;
//   - a throttle flag file: while it exists, the copy pauses;
//   - a panic flag file: once it exists, the migration stops;
//   - the operator's own pause (SetOperator, from sluice ctl pause).
//
// Only the copy pauses. The apply goes on: its work is the application's own
// writes, and a backlog left to grow would only push the cut-over back.
package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limit is a ceiling on one global status variable.
type Limit struct {
	Name string
	Max  int64
}

var statusName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// ParseLimits parses "Name=N[,Name=N...]" (the peers' --max-load syntax). An
// empty spec is no limit.
func ParseLimits(spec string) ([]Limit, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	var out []Limit
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("%q is not Name=N (e.g. Threads_running=25)", strings.TrimSpace(part))
		}
		if !statusName.MatchString(name) {
			return nil, fmt.Errorf("%q is not a status variable name", name)
		}
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 1 {
			// A ceiling of 0 is always reached: the copy would wait for ever.
			return nil, fmt.Errorf("%s=%s: the ceiling must be a whole number >= 1 (a status value reaches it at once when it is 0)", name, val)
		}
		key := strings.ToLower(name)
		if seen[key] {
			return nil, fmt.Errorf("%s is given twice", name)
		}
		seen[key] = true
		out = append(out, Limit{Name: name, Max: n})
	}
	return out, nil
}

// Reached returns the first limit the status values reach ("Threads_running=31
// >= 25"), or "". Names are matched without regard to case; a variable
// missing from status never counts as reached (Check reports it).
func Reached(limits []Limit, status map[string]int64) string {
	for _, l := range limits {
		if v, ok := status[strings.ToLower(l.Name)]; ok && v >= l.Max {
			return fmt.Sprintf("%s=%d >= %d", l.Name, v, l.Max)
		}
	}
	return ""
}

// Decision is what one check found.
type Decision struct {
	// Throttle, if not "", is why the copy pauses now.
	Throttle string
	// Abort, if not "", is why the migration stops.
	Abort string
}

// Signals is what one check saw.
type Signals struct {
	Status   map[string]int64
	FlagFile bool // the throttle flag file exists
	Panic    bool // the panic flag file exists
}

// Decider turns checks into decisions; it remembers whether the critical
// load was reached at the previous check. Its zero value has no limits.
type Decider struct {
	MaxLoad, CriticalLoad []Limit
	FlagFile, PanicFile   string
	critical              string // critical load reached at the last check
}

// Next decides on one check. The critical load stops the migration only when
// reached at two checks in a row: one burst of connections is not enough.
func (d *Decider) Next(s Signals) Decision {
	var dec Decision
	if s.Panic {
		dec.Abort = "the panic flag file " + d.PanicFile + " exists"
		return dec
	}
	crit := Reached(d.CriticalLoad, s.Status)
	if crit != "" && d.critical != "" {
		dec.Abort = "critical load: " + crit
		return dec
	}
	d.critical = crit
	switch {
	case s.FlagFile:
		dec.Throttle = "the throttle flag file " + d.FlagFile + " exists"
	case crit != "":
		dec.Throttle = "critical load: " + crit + " (checking again)"
	default:
		if r := Reached(d.MaxLoad, s.Status); r != "" {
			dec.Throttle = "max load: " + r
		}
	}
	return dec
}

// Config configures a Throttler.
type Config struct {
	DB                    *sql.DB
	MaxLoad, CriticalLoad []Limit
	FlagFile, PanicFile   string
	// Interval between checks (default 250ms).
	Interval time.Duration
	// OnChange, if set, is called when the copy pauses (reason) or resumes ("").
	OnChange func(reason string)
	// Lag, if set, says why the copy must pause for replica lag, or "".
	// It is asked at every check.
	Lag func() string
}

// ErrAbort wraps the reason a Throttler stopped the migration.
var ErrAbort = errors.New("stopped")

// Throttler checks the signals every Interval and holds Enter while the
// copy should pause.
type Throttler struct {
	cfg     Config
	decider Decider
	names   []string

	mu  sync.Mutex
	all pause // why the copy pauses now ("": it does not)
	lag pause // the part of the pauses due to replica lag
	// operator is the operator's pause ("": none); it outranks every
	// other reason but the stops.
	operator string
	// busy counts the chunks between Enter and Leave.
	busy int
}

// pause follows one cause of pauses.
type pause struct {
	reason string
	clear  chan struct{} // closed while reason is ""
	since  time.Time
	total  time.Duration
}

func newPause() pause {
	p := pause{clear: make(chan struct{})}
	close(p.clear)
	return p
}

// set records the cause's current reason and reports whether it changed
// between paused and not.
func (p *pause) set(reason string, now time.Time) bool {
	changed := (reason == "") != (p.reason == "")
	switch {
	case reason != "" && p.reason == "":
		p.clear = make(chan struct{})
		p.since = now
	case reason == "" && p.reason != "":
		close(p.clear)
		p.total += now.Sub(p.since)
	}
	p.reason = reason
	return changed
}

func (p *pause) sum() time.Duration {
	if p.reason != "" {
		return p.total + time.Since(p.since)
	}
	return p.total
}

// New returns a Throttler; Active reports whether it has anything to watch.
func New(cfg Config) *Throttler {
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	t := &Throttler{cfg: cfg, all: newPause(), lag: newPause()}
	t.decider = Decider{MaxLoad: cfg.MaxLoad, CriticalLoad: cfg.CriticalLoad, FlagFile: cfg.FlagFile, PanicFile: cfg.PanicFile}
	t.names = names(cfg.MaxLoad, cfg.CriticalLoad)
	return t
}

// names lists the status variables the limits name, each once.
func names(maxLoad, critical []Limit) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range append(append([]Limit{}, maxLoad...), critical...) {
		if k := strings.ToLower(l.Name); !seen[k] {
			seen[k] = true
			out = append(out, l.Name)
		}
	}
	return out
}

// SetMaxLoad replaces the --max-load ceilings while the run goes on. Every
// variable they name must exist on the server.
func (t *Throttler) SetMaxLoad(ctx context.Context, limits []Limit) error {
	t.mu.Lock()
	critical := t.decider.CriticalLoad
	t.mu.Unlock()
	all := names(limits, critical)
	status, err := t.read(ctx, all)
	if err != nil {
		return err
	}
	for _, n := range all {
		if _, ok := status[strings.ToLower(n)]; !ok {
			return fmt.Errorf("the server has no global status variable %s (see SHOW GLOBAL STATUS)", n)
		}
	}
	t.mu.Lock()
	t.decider.MaxLoad, t.names = limits, all
	t.mu.Unlock()
	return nil
}

// MaxLoad returns the --max-load ceilings now in force.
func (t *Throttler) MaxLoad() []Limit {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.decider.MaxLoad
}

// SetOperator pauses the copy for the operator (reason not "") or lifts
// that pause (""). A pause takes effect at once; once lifted, the copy goes
// on at the next check (Run checks every Interval) if no other signal holds
// it.
func (t *Throttler) SetOperator(reason string) {
	t.mu.Lock()
	t.operator = reason
	lag := t.lag.reason
	t.mu.Unlock()
	if reason != "" {
		t.set(reason, lag)
	}
}

// Enter returns at once unless the copy should pause, then waits until it
// may go on or ctx is done; it counts the caller as copying a chunk until
// its Leave: a pause that begins meanwhile finds it
// in Busy, never between the wait and the count.
func (t *Throttler) Enter(ctx context.Context) error {
	for {
		t.mu.Lock()
		if t.all.reason == "" {
			t.busy++
			t.mu.Unlock()
			return nil
		}
		open := t.all.clear
		t.mu.Unlock()
		select {
		case <-open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Leave ends the chunk Enter counted.
func (t *Throttler) Leave() {
	t.mu.Lock()
	t.busy--
	t.mu.Unlock()
}

// Busy returns how many chunks are being copied now.
func (t *Throttler) Busy() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.busy
}

// Active reports whether any signal is configured.
func (t *Throttler) Active() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.names) > 0 || t.cfg.FlagFile != "" || t.cfg.PanicFile != "" || t.cfg.Lag != nil
}

// Preflight checks the configuration against the server before anything is
// created: every named status variable exists, and the panic flag file does
// not exist yet (a stale one would stop the migration at once).
func (t *Throttler) Preflight(ctx context.Context) error {
	if t.cfg.PanicFile != "" {
		if _, err := os.Stat(t.cfg.PanicFile); err == nil {
			return fmt.Errorf("the panic flag file %s exists already: remove it, or name another", t.cfg.PanicFile)
		}
	}
	status, err := t.status(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	names := t.names
	t.mu.Unlock()
	for _, n := range names {
		if _, ok := status[strings.ToLower(n)]; !ok {
			return fmt.Errorf("the server has no global status variable %s (see SHOW GLOBAL STATUS)", n)
		}
	}
	return nil
}

// status reads the named global status variables.
func (t *Throttler) status(ctx context.Context) (map[string]int64, error) {
	t.mu.Lock()
	names := t.names
	t.mu.Unlock()
	return t.read(ctx, names)
}

// read reads the global status variables names.
func (t *Throttler) read(ctx context.Context, names []string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(names) == 0 {
		return out, nil
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'" // names are checked by ParseLimits: letters, digits, _
	}
	rows, err := t.cfg.DB.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ("+strings.Join(quoted, ",")+")")
	if err != nil {
		return nil, fmt.Errorf("read the server's load: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, val string
		if err := rows.Scan(&name, &val); err != nil {
			return nil, err
		}
		if n, err := strconv.ParseInt(val, 10, 64); err == nil {
			out[strings.ToLower(name)] = n
		}
	}
	return out, rows.Err()
}

func exists(path string) bool {
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

// Check checks the signals once and pauses or releases the copy. It returns
// an error wrapping ErrAbort when the migration must stop; a failed status
// read pauses the copy (a server that cannot answer is not idle) until a
// later check succeeds. Call it once before the copy starts, then Run.
func (t *Throttler) Check(ctx context.Context) error {
	if !t.Active() {
		t.set("", "") // an operator's pause lifted, nothing else to watch
		return nil
	}
	status, err := t.status(ctx)
	var dec Decision
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		dec.Throttle = "cannot read the server's load: " + err.Error()
	} else {
		sig := Signals{Status: status, FlagFile: exists(t.cfg.FlagFile), Panic: exists(t.cfg.PanicFile)}
		t.mu.Lock()
		dec = t.decider.Next(sig)
		t.mu.Unlock()
	}
	if dec.Abort != "" {
		return fmt.Errorf("%w: %s", ErrAbort, dec.Abort)
	}
	lag := ""
	if t.cfg.Lag != nil {
		lag = t.cfg.Lag()
	}
	if dec.Throttle == "" {
		dec.Throttle = lag
	}
	t.set(dec.Throttle, lag)
	return nil
}

// Panicked says why the migration must stop now because the panic flag
// file exists, or "". It reads the file only, and is safe beside Run.
func (t *Throttler) Panicked() string {
	if exists(t.cfg.PanicFile) {
		return "the panic flag file " + t.cfg.PanicFile + " exists"
	}
	return ""
}

// Run checks the signals every Interval until ctx is done or Check returns
// an error, which it returns. It checks even with nothing to watch: the
// operator may pause the run or set --max-load meanwhile.
func (t *Throttler) Run(ctx context.Context) error {
	tick := time.NewTicker(t.cfg.Interval)
	defer tick.Stop()
	defer t.set("", "")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := t.Check(ctx); err != nil {
			return err
		}
	}
}

// set records the current decision and the replica-lag part of it at one
// instant, so the lag pause is never counted longer than the pause in all.
func (t *Throttler) set(reason, lag string) {
	now := time.Now()
	t.mu.Lock()
	if t.operator != "" {
		// A check that read the signals before the operator paused must
		// not lift the pause.
		reason = t.operator
	}
	t.lag.set(lag, now)
	changed := t.all.set(reason, now)
	t.mu.Unlock()
	if changed && t.cfg.OnChange != nil {
		t.cfg.OnChange(reason)
	}
}

// Reason says why the copy pauses now, or "".
func (t *Throttler) Reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.all.reason
}

// Throttled returns how long the copy has been paused in all.
func (t *Throttler) Throttled() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.all.sum()
}

// Lagged returns how long the copy has been paused for replica lag in all.
func (t *Throttler) Lagged() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lag.sum()
}

// WaitLag returns once no replica lags beyond the limit (at the last check),
// or when ctx is done. The cut-over waits on it: a swap while a replica lags
// would leave the replica's readers on the old schema for that long.
func (t *Throttler) WaitLag(ctx context.Context) error {
	t.mu.Lock()
	clear := t.lag.clear
	t.mu.Unlock()
	select {
	case <-clear:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LagReason says why replica lag pauses the copy now, or "".
func (t *Throttler) LagReason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lag.reason
}
