// Package replica finds the primary's replicas and measures how far each
// lags behind it, so that the copy can pause before a replica falls behind.
//
// Lag is measured with a heartbeat: sluice writes its own clock's time into a
// one-row table on the primary every Interval and reads the row back on each
// replica; the lag is sluice's clock now minus the time the replica has.
// Both readings come from the same clock, so the servers' clocks may differ;
// the measure is exact to within Interval plus one query. It counts what the
// application sees (a transaction committed on the primary and not yet
// visible on the replica), on MySQL and MariaDB alike, whatever the
// replication topology. The applier timestamps of performance_schema were
// not chosen: they say when the replica last applied something, which on an
// idle primary is long ago, and they do not exist on MariaDB.
package replica

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Replica is one server that replicates, directly or through others, from
// the primary.
type Replica struct {
	Name     string // host:port
	ServerID int64  // as the server says; 0 when it could not be reached
	db       *sql.DB
	down     error // set while it could not be reached
	// conn reaches it; retryAt is when a replica that could not be reached
	// is tried again (the monitor's reads).
	conn    dbconn.Config
	retryAt time.Time
}

// Close closes the replica's connections.
func (r *Replica) Close() {
	if r.db != nil {
		r.db.Close()
	}
}

// Discovery says how to find the replicas.
type Discovery struct {
	Primary *sql.DB
	// Conn is the primary's connection settings; replicas are reached with
	// its user, password and TLS at their own host and port.
	Conn dbconn.Config
	// Named are replicas given by the operator, host:port.
	Named []string
	// Auto walks SHOW REPLICAS from the primary down.
	Auto bool
	Log  *slog.Logger
}

// listed is one row of SHOW REPLICAS.
type listed struct {
	serverID int64
	host     string
	port     int
}

// Discover returns the replicas: the named ones, and with Auto every server
// SHOW REPLICAS lists on the primary and, recursively, on each replica found.
// A listed entry that answers with another server id than the one it
// registered with is a binlog client (a tool registers with its own host
// name and the port it reached the primary on), not a replica: it is
// skipped, as is every binlog reader of sluice's (dbconn.ReaderHost). A listed replica that does not report its host (report_host) must
// be named. A replica that cannot be reached is kept: it counts as lagging.
func Discover(ctx context.Context, d Discovery) ([]*Replica, error) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	var primaryID int64
	if err := d.Primary.QueryRowContext(ctx, "SELECT @@server_id").Scan(&primaryID); err != nil {
		return nil, fmt.Errorf("read the primary's server id: %w", err)
	}
	seen := map[int64]bool{primaryID: true}
	byName := map[string]bool{}
	var out []*Replica
	var queue []*sql.DB
	add := func(r *Replica) {
		out = append(out, r)
		byName[r.Name] = true
		if r.ServerID != 0 {
			seen[r.ServerID] = true
		}
		if r.db != nil {
			queue = append(queue, r.db)
		}
	}
	for _, n := range d.Named {
		host, port, err := SplitHostPort(n)
		if err != nil {
			return nil, err
		}
		r := connect(ctx, d.Conn, host, port)
		if r.down != nil {
			return nil, fmt.Errorf("replica %s (--replica) cannot be reached: %w", r.Name, r.down)
		}
		if seen[r.ServerID] {
			r.Close()
			continue // named twice, or the primary itself
		}
		add(r)
	}
	if !d.Auto {
		return out, nil
	}
	queue = append([]*sql.DB{d.Primary}, queue...)
	for len(queue) > 0 {
		src := queue[0]
		queue = queue[1:]
		rows, err := list(ctx, src)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		for _, l := range rows {
			if seen[l.serverID] || l.port == 0 || l.host == dbconn.ReaderHost {
				continue // the primary, a replica seen, a client, or a sluice run's binlog reader
			}
			if l.host == "" {
				closeAll(out)
				return nil, fmt.Errorf("replica with server id %d does not report its host (report_host): name it with --replica host:port, "+
					"or turn discovery off with --replica-discovery=false and name every replica", l.serverID)
			}
			name := net.JoinHostPort(l.host, strconv.Itoa(l.port))
			if byName[name] {
				continue
			}
			r := connect(ctx, d.Conn, l.host, l.port)
			switch {
			case r.down != nil:
				d.Log.Warn("replica cannot be reached; it counts as lagging until it answers", "replica", name, "server_id", l.serverID, "error", r.down)
				r.ServerID = l.serverID
				add(r)
			case r.ServerID != l.serverID:
				d.Log.Info("skipping a binlog client registered as a replica (its address answers with another server id)",
					"address", name, "registered_id", l.serverID, "answering_id", r.ServerID)
				r.Close()
				seen[l.serverID] = true
			default:
				add(r)
			}
		}
	}
	return out, nil
}

func closeAll(rs []*Replica) {
	for _, r := range rs {
		r.Close()
	}
}

// retryDown is how often a replica that cannot be reached is tried again.
const retryDown = 2 * time.Second

// connect opens a replica; a failure is kept in down.
func connect(ctx context.Context, conn dbconn.Config, host string, port int) *Replica {
	// A replica's certificate names the replica: --tls-server-name is the
	// primary's.
	conn.Host, conn.Port, conn.TLSFiles.ServerName = host, port, ""
	r := &Replica{Name: net.JoinHostPort(host, strconv.Itoa(port)), conn: conn}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	db, err := dbconn.Open(qctx, conn, "", 2)
	if err != nil {
		r.down = err
		return r
	}
	if err := db.QueryRowContext(qctx, "SELECT @@server_id").Scan(&r.ServerID); err != nil {
		db.Close()
		r.down = err
		r.ServerID = 0
		return r
	}
	r.db = db
	return r
}

// list reads SHOW REPLICAS (SHOW SLAVE HOSTS on servers without it).
func list(ctx context.Context, db *sql.DB) ([]listed, error) {
	rows, err := db.QueryContext(ctx, "SHOW REPLICAS")
	if err != nil && dbconn.ErrorNumber(err) == 1064 { // MariaDB before 10.5, MySQL before 8.0.22
		rows, err = db.QueryContext(ctx, "SHOW SLAVE HOSTS")
	}
	if err != nil {
		return nil, fmt.Errorf("list the replicas (SHOW REPLICAS): %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []listed
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var l listed
		for i, c := range cols {
			switch strings.ToLower(c) {
			case "server_id":
				l.serverID, _ = strconv.ParseInt(vals[i].String, 10, 64)
			case "host":
				l.host = vals[i].String
			case "port":
				l.port, _ = strconv.Atoi(vals[i].String)
			}
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// SplitHostPort parses a --replica value, host:port (an IPv6 host in
// brackets). It refuses anything that looks like a DSN: a password has no
// place on a command line.
func SplitHostPort(s string) (string, int, error) {
	if strings.ContainsAny(s, "@/()") {
		return "", 0, fmt.Errorf("--replica %q: give host:port only; replicas are reached with the primary's user and password", s)
	}
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("--replica %q is not host:port", s)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("--replica %q is not host:port with a port from 1 to 65535", s)
	}
	return host, port, nil
}

// Lag is one replica's state.
type Lag struct {
	Name string
	Lag  time.Duration
	// Ahead is the lag the replica is heading for with what it has
	// received already: a replica that applies the primary's last second in
	// three seconds lags three times more by the time it has applied what
	// it lags now. The heartbeat shows only what the replica has applied,
	// not the work queued behind it, so throttling on Lag alone overshoots
	// by that queue; Ahead sees it coming. It is Lag divided by the rate
	// (below 1) at which the replica's heartbeat advanced over the last
	// second, and Lag when it keeps up.
	Ahead time.Duration
	// Err, if not nil, is why the lag is unknown (unreachable, no heartbeat
	// yet): the replica counts as lagging.
	Err error

	beat time.Time // the heartbeat value read
}

// aheadWindow is how far back the rate of a replica's heartbeat is taken:
// long enough to smooth the 100ms steps of the heartbeat, short enough to
// follow the copy's chunks.
const aheadWindow = time.Second

// minRate bounds the rate a lag is divided by: a replica that applies
// nothing (a stopped applier) is heading for lag / minRate.
const minRate = 0.05

// sample is one reading of a replica's heartbeat.
type sample struct{ at, beat time.Time }

// rate is how many seconds of the primary's time the replica applied a
// second, from the readings of the last aheadWindow (oldest first) and the
// newest one; ok is false when they span too little time to tell.
func rate(hist []sample, now sample) (float64, bool) {
	if len(hist) == 0 {
		return 0, false
	}
	first := hist[0]
	span := now.at.Sub(first.at)
	if span < aheadWindow/2 {
		return 0, false
	}
	return float64(now.beat.Sub(first.beat)) / float64(span), true
}

// ahead estimates where lag is heading from the readings of the last
// aheadWindow (oldest first) and the newest one.
func ahead(hist []sample, now sample, lag time.Duration) time.Duration {
	r, ok := rate(hist, now)
	if !ok || r >= 1 {
		return lag
	}
	return time.Duration(float64(lag) / max(r, minRate))
}

// slowMemory is how long SlowRate remembers a replica falling behind: the
// copy's pauses let it catch up, and the next chunks would again be sized as
// if it kept up.
const slowMemory = 10 * time.Second

// A replica falls behind when it applies the primary's time at under
// slowBelow of its pace with at least slowLag of lag: a healthy replica's
// commits arrive in bursts, and over one second its rate reads 0.85-1.15.
const (
	slowBelow = 0.8
	slowLag   = 200 * time.Millisecond
)

// Monitor writes the heartbeat and measures each replica's lag.
type Monitor struct {
	primary  *sql.DB
	table    string // quoted heartbeat table
	replicas []*Replica
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu sync.Mutex
	// ignored marks the replicas the operator stopped watching (Ignore).
	ignored []bool
	lags    []Lag
	hist    [][]sample    // each replica's readings of the last aheadWindow
	slow    []rateAt      // the lowest rate below 1 of each measure, for slowMemory
	worst   time.Duration // the highest lag measured
	warned  map[string]bool
}

// MonitorConfig configures a Monitor.
type MonitorConfig struct {
	Primary  *sql.DB
	Table    string // the heartbeat table, quoted; CreateTable makes it
	Replicas []*Replica
	Interval time.Duration // default 100ms
	Log      *slog.Logger
}

// NewMonitor returns a monitor; nothing runs until Run.
func NewMonitor(cfg MonitorConfig) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &Monitor{primary: cfg.Primary, table: cfg.Table, replicas: cfg.Replicas, interval: cfg.Interval,
		log: cfg.Log, now: time.Now, warned: map[string]bool{}}
	m.lags = make([]Lag, len(cfg.Replicas))
	m.hist = make([][]sample, len(cfg.Replicas))
	m.ignored = make([]bool, len(cfg.Replicas))
	for i, r := range cfg.Replicas {
		m.lags[i] = Lag{Name: r.Name, Err: errors.New("not measured yet")}
	}
	return m
}

// CreateTable creates the heartbeat table on the primary, from where it
// replicates. A table of that name that exists already is an error: it may
// be the application's.
func CreateTable(ctx context.Context, db *sql.DB, quoted string) error {
	_, err := db.ExecContext(ctx, "CREATE TABLE "+quoted+
		" (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, beat BIGINT NOT NULL) COMMENT='sluice replica lag heartbeat'")
	if err != nil {
		return fmt.Errorf("create the heartbeat table %s: %w", quoted, err)
	}
	return nil
}

// Run writes a heartbeat and reads every replica's each Interval until ctx
// is done. A failed heartbeat write is logged and tried again: the replicas
// then seem to lag, which pauses the copy, the safe side.
func (m *Monitor) Run(ctx context.Context) {
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	for {
		m.beat(ctx)
		m.measure(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (m *Monitor) beat(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := m.primary.ExecContext(qctx, "REPLACE INTO "+m.table+" (id, beat) VALUES (1, ?)", m.now().UnixMicro())
	if err != nil && ctx.Err() == nil {
		m.warnOnce("heartbeat", "cannot write the replica heartbeat", err)
	}
}

// measure reads the heartbeat on every replica watched at once.
func (m *Monitor) measure(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var wg sync.WaitGroup
	lags := make([]Lag, len(m.replicas))
	m.mu.Lock()
	ignored := make([]bool, len(m.replicas))
	for i := range ignored {
		ignored[i] = m.ignoredLocked(i)
	}
	m.mu.Unlock()
	for i, r := range m.replicas {
		if ignored[i] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lags[i] = m.read(qctx, r)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at := m.now()
	for i, l := range lags {
		if !m.ignoredLocked(i) {
			m.recordLocked(i, l, at)
		}
	}
}

// Ignore stops watching the replica named name (HOST:PORT, as Names gives
// it), for an operator whose replica is gone for good: an unreachable
// replica counts as lagging and would hold the copy forever. It returns how
// many replicas are still watched.
func (m *Monitor) Ignore(name string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.replicas, func(r *Replica) bool { return strings.EqualFold(r.Name, name) })
	if i < 0 {
		return 0, fmt.Errorf("no watched replica is named %s (watched: %s)", name, strings.Join(m.namesLocked(), ", "))
	}
	if m.ignoredLocked(i) {
		return 0, fmt.Errorf("replica %s is not watched already", name)
	}
	if len(m.ignored) < len(m.replicas) {
		m.ignored = append(m.ignored, make([]bool, len(m.replicas)-len(m.ignored))...)
	}
	m.ignored[i] = true
	if i < len(m.hist) {
		m.hist[i] = nil
	}
	m.log.Warn("the operator stopped watching a replica's lag", "replica", m.replicas[i].Name)
	return len(m.namesLocked()), nil
}

// recordLocked takes replica i's reading l, made at at.
func (m *Monitor) recordLocked(i int, l Lag, at time.Time) {
	if l.Err != nil {
		m.warnOnceLocked(l.Name, "replica counts as lagging", l.Err)
		m.hist[i] = nil
		m.lags[i] = l
		return
	}
	now := sample{at: at, beat: l.beat}
	l.Ahead = ahead(m.hist[i], now, l.Lag)
	if r, ok := rate(m.hist[i], now); ok && r < slowBelow && l.Lag >= slowLag {
		m.slow = append(m.slow, rateAt{at: at, rate: max(r, minRate)})
	}
	for len(m.slow) > 0 && at.Sub(m.slow[0].at) > slowMemory {
		m.slow = m.slow[1:]
	}
	h := append(m.hist[i], now)
	for len(h) > 1 && at.Sub(h[0].at) > aheadWindow {
		h = h[1:]
	}
	m.hist[i] = h
	if m.warned[l.Name] {
		m.log.Info("replica answers again", "replica", l.Name, "lag", l.Lag.Round(time.Millisecond))
		delete(m.warned, l.Name)
	}
	m.worst = max(m.worst, l.Lag)
	m.lags[i] = l
}

func (m *Monitor) read(ctx context.Context, r *Replica) Lag {
	l := Lag{Name: r.Name}
	if r.db == nil && time.Now().After(r.retryAt) {
		// Not reached at discovery, or since: tried again every few
		// seconds (a replica restarting, a grant not replicated yet).
		r.retryAt = time.Now().Add(retryDown)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		again := connect(cctx, r.conn, r.conn.Host, r.conn.Port)
		cancel()
		r.db, r.down = again.db, again.down
		if again.db != nil {
			r.ServerID = again.ServerID
		}
	}
	if r.db == nil {
		l.Err = fmt.Errorf("cannot be reached: %w", r.down)
		return l
	}
	var beat int64
	err := r.db.QueryRowContext(ctx, "SELECT beat FROM "+m.table+" WHERE id = 1").Scan(&beat)
	switch {
	case errors.Is(err, sql.ErrNoRows) || dbconn.ErrorNumber(err) == 1146:
		l.Err = errors.New("the heartbeat has not reached it yet")
	case err != nil:
		l.Err = err
	default:
		l.beat = time.UnixMicro(beat)
		l.Lag = max(0, m.now().Sub(l.beat))
	}
	return l
}

func (m *Monitor) warnOnce(key, msg string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.warnOnceLocked(key, msg, err)
}

func (m *Monitor) warnOnceLocked(key, msg string, err error) {
	if m.warned[key] {
		return
	}
	m.warned[key] = true
	m.log.Warn(msg, "replica", key, "error", err)
}

// Slowest returns the replica that lags most, or is heading for the most
// lag: one that cannot be measured first. ok is false when no replica is
// watched.
func (m *Monitor) Slowest() (l Lag, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.lags {
		if m.ignoredLocked(i) {
			continue
		}
		if !ok || (x.Err != nil && l.Err == nil) || (x.Err == nil) == (l.Err == nil) && max(x.Lag, x.Ahead) > max(l.Lag, l.Ahead) {
			l, ok = x, true
		}
	}
	return l, ok
}

// rateAt is a replica's rate at one measure.
type rateAt struct {
	at   time.Time
	rate float64
}

// SlowRate returns the lowest rate, below 1, at which a replica applied the
// primary's time over the last slowMemory (at least minRate), or 1 when
// every replica kept up.
func (m *Monitor) SlowRate() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for len(m.slow) > 0 && now.Sub(m.slow[0].at) > slowMemory {
		m.slow = m.slow[1:]
	}
	low := 1.0
	for _, x := range m.slow {
		low = min(low, x.rate)
	}
	return low
}

// Worst returns the highest lag measured so far.
func (m *Monitor) Worst() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.worst
}

// ignoredLocked reports whether the operator stopped watching replica i.
// m.mu must be held.
func (m *Monitor) ignoredLocked(i int) bool { return i < len(m.ignored) && m.ignored[i] }

// Names returns the names of the replicas watched.
func (m *Monitor) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.namesLocked()
}

func (m *Monitor) namesLocked() []string {
	out := make([]string, 0, len(m.replicas))
	for i, r := range m.replicas {
		if !m.ignoredLocked(i) {
			out = append(out, r.Name)
		}
	}
	return out
}

// Close closes the replicas' connections.
func (m *Monitor) Close() { closeAll(m.replicas) }

// Over reports why the copy must pause for replica lag ("" when it need
// not): the slowest replica lags more than max, or is heading there with
// what it has received already, or cannot be measured.
func Over(l Lag, ok bool, limit time.Duration) string {
	switch {
	case !ok:
		return ""
	case l.Err != nil:
		return fmt.Sprintf("replica %s: %v", l.Name, l.Err)
	case l.Lag > limit:
		return fmt.Sprintf("replica %s lags %s (--max-lag %s)", l.Name, l.Lag.Round(10*time.Millisecond), limit)
	case l.Ahead > limit:
		return fmt.Sprintf("replica %s lags %s and falls behind: it is heading for %s with what it has received (--max-lag %s)",
			l.Name, l.Lag.Round(10*time.Millisecond), l.Ahead.Round(10*time.Millisecond), limit)
	}
	return ""
}
