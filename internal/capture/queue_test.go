package capture

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
)

// sink collects what a poller hands over: the keys marked (by their bytes)
// and the keys told to a presence sink, with what was claimed.
type sink struct {
	mu      sync.Mutex
	marks   int
	added   map[string]int // marks per key
	claimed map[string]bool
}

func newSink() *sink { return &sink{added: map[string]int{}, claimed: map[string]bool{}} }

func (s *sink) Add(keys ...rowkey.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks += len(keys)
	for _, k := range keys {
		s.added[k.Encode()]++
	}
}

func (s *sink) Present(keys []rowkey.Key, present []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range keys {
		s.claimed[k.Encode()] = present[i]
	}
}

// has reports how many times k was marked, and whether it was told to the
// presence sink (always as not claimed present: see NewPoller).
func (s *sink) has(k rowkey.Key) (marks int, told bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	claim, told := s.claimed[k.Encode()]
	return s.added[k.Encode()], told && !claim
}

// queueOn creates table t's queue and returns it with t's key.
func queueOn(t *testing.T, db *testdb.DB) (*Queue, rowkey.Cols) {
	t.Helper()
	ctx := context.Background()
	tbl, err := schema.Load(ctx, db.DB, db.Name, "t")
	if err != nil {
		t.Fatal(err)
	}
	key, err := rowkey.NewCols(tbl.PKColumns())
	if err != nil {
		t.Fatal(err)
	}
	q, err := New(tbl, key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Create(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	return q, key
}

// TestTriggersRecordKeyChanges: an insert records the new key, a delete the
// old one, an update that keeps the key's bytes one row, and an update that
// changes them (even to bytes the collation equates) the old key, then the
// new one.
func TestTriggersRecordKeyChanges(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (a INT NOT NULL, b VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, v INT, PRIMARY KEY (a, b))")
	q, _ := queueOn(t, db)
	db.MustExec(t, "INSERT INTO t VALUES (1, 'x', 0)", "UPDATE t SET v = 5", "UPDATE t SET b = 'X'",
		"UPDATE t SET a = 2", "DELETE FROM t")
	got := db.Dump(t, q.Table, "a, HEX(b)", SeqColumn)
	want := [][]string{{"'1'", "'78'"}, {"'1'", "'78'"}, {"'1'", "'78'"}, {"'1'", "'58'"},
		{"'1'", "'58'"}, {"'2'", "'58'"}, {"'2'", "'58'"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queue\n%v\nwant\n%v", got, want)
	}
	if err := q.Drop(context.Background(), db.DB); err != nil {
		t.Fatal(err)
	}
	if tables := db.Tables(t); len(tables) != 1 {
		t.Fatalf("tables after Drop: %v", tables)
	}
	db.MustExec(t, "INSERT INTO t VALUES (3, 'y', 0)") // no trigger left to fail
}

// TestPollMissesALateCommitDrainFindsIt: a transaction that took a lower
// sequence number commits after a higher one was read; Poll, which reads
// above the highest number read, cannot see it, and Drain must.
func TestPollMissesALateCommitDrainFindsIt(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	q, _ := queueOn(t, db)
	ctx := context.Background()
	early, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback()
	if _, err := early.Exec("INSERT INTO t VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	db.MustExec(t, "INSERT INTO t VALUES (2, 0)")
	s := newSink()
	p := NewPoller(q, s)
	if n, err := p.Poll(ctx, db.DB); err != nil || n != 1 {
		t.Fatalf("first poll read %d rows (%v), want 1", n, err)
	}
	if err := early.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Poll(ctx, db.DB); err != nil || n != 0 {
		t.Fatalf("second poll read %d rows (%v): the late commit is below the cursor, want 0", n, err)
	}
	if seen, _ := s.has(rowkey.Key{int64(1)}); seen > 0 {
		t.Fatal("key 1 seen before Drain")
	}
	if n, err := p.Drain(ctx, db.DB); err != nil || n != 2 {
		t.Fatalf("drain read %d rows (%v), want 2 (one new)", n, err)
	}
	if seen, _ := s.has(rowkey.Key{int64(1)}); seen != 1 {
		t.Fatal("key 1 not seen after Drain")
	}
	if s.marks != 2 {
		t.Fatalf("%d marks handed over, want 2: Drain handed a row read before again", s.marks)
	}
}

// TestForgetKeepsWhatIsNotApplied: Forget deletes the rows of rounds before
// the position given, and only those.
func TestForgetKeepsWhatIsNotApplied(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	q, _ := queueOn(t, db)
	ctx := context.Background()
	p := NewPoller(q, newSink())
	db.MustExec(t, "INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)")
	if _, err := p.Poll(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	second := p.Round()
	db.MustExec(t, "UPDATE t SET v = 1 WHERE id < 3")
	if _, err := p.Poll(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	if p.Held() != 5 {
		t.Fatalf("held %d, want 5", p.Held())
	}
	if n, err := p.Forget(ctx, db.DB, second); err != nil || n != 3 {
		t.Fatalf("Forget deleted %d (%v), want the first round's 3", n, err)
	}
	if got := db.Dump(t, q.Table, "id", SeqColumn); fmt.Sprint(got) != "[['1'] ['2']]" {
		t.Fatalf("queue after Forget: %v, want the second round's keys 1 and 2", got)
	}
	if n, err := p.Forget(ctx, db.DB, p.Round()); err != nil || n != 2 || p.Held() != 0 {
		t.Fatalf("Forget deleted %d (%v), %d held; want 2 and 0", n, err, p.Held())
	}
}

// TestQueueRecordsEveryCommittedChange: writers insert, update (moving keys
// too), delete and roll back in transactions of several statements while a
// poller reads the queue; after a final Drain, every key a committed
// transaction touched has reached the sink at least once for each such
// change, and was told to the tracker. The oracle is the writers' own log of
// what they committed. SLUICE_CAPTURE_SEED replays the writers' choices.
func TestQueueRecordsEveryCommittedChange(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT NOT NULL, s VARCHAR(8) COLLATE utf8mb4_general_ci NOT NULL, v INT, PRIMARY KEY (id, s))")
	q, _ := queueOn(t, db)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_CAPTURE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (SLUICE_CAPTURE_SEED)", seed)
	ctx := context.Background()
	s := newSink()
	p := NewPoller(q, s)
	p.batch = 7 // several queries per poll

	var (
		mu      sync.Mutex
		touched = map[string]rowkey.Key{}
		changes = map[string]int{} // committed changes per key
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				keys, commit, err := writeTx(db.DB, r, w)
				if err != nil {
					t.Error(err)
					return
				}
				if commit {
					mu.Lock()
					for _, k := range keys {
						touched[k.Encode()] = k
						changes[k.Encode()]++
					}
					mu.Unlock()
				}
			}
		}()
	}
	polls := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); polls++ {
		if _, err := p.Poll(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if _, err := p.Drain(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	if len(touched) < 50 {
		t.Fatalf("the writers committed changes to only %d keys: the check would prove little", len(touched))
	}
	for _, k := range touched {
		// Each committed change of a key is one queue row (MariaDB may add
		// more: see NewPoller).
		if marks, told := s.has(k); marks < changes[k.Encode()] || !told {
			t.Fatalf("key %v: %d committed changes, %d marks, told to the tracker %v", k, changes[k.Encode()], marks, told)
		}
	}
	t.Logf("%d polls, %d keys changed, %d marks", polls, len(touched), s.marks)
}

// writeTx runs one transaction of writer w (rows of id%4 == w, so that
// writers do not deadlock on each other's rows) and returns the keys it
// touched, before and after, and whether it committed.
func writeTx(db *sql.DB, r *rand.Rand, w int) ([]rowkey.Key, bool, error) {
	tx, err := db.Begin()
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	word := func() string { return []string{"a", "A", "a ", "b", "B", ""}[r.IntN(6)] }
	var keys []rowkey.Key
	for range 1 + r.IntN(3) {
		id := int64(4*r.IntN(30) + w)
		s := word()
		switch r.IntN(4) {
		case 0:
			res, err := tx.Exec("INSERT IGNORE INTO t VALUES (?, ?, ?)", id, s, r.IntN(100))
			if err != nil {
				return nil, false, err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				keys = append(keys, rowkey.Key{id, []byte(s)})
			}
		case 1, 2:
			// Move a row to another key (or keep it): both keys are touched.
			var old string
			if err := tx.QueryRow("SELECT s FROM t WHERE id = ? LIMIT 1 FOR UPDATE", id).Scan(&old); err == sql.ErrNoRows {
				continue
			} else if err != nil {
				return nil, false, err
			}
			ns := word()
			res, err := tx.Exec("UPDATE IGNORE t SET s = ?, v = IFNULL(v, 0) + 1 WHERE id = ? AND s = CAST(? AS BINARY)", ns, id, old)
			if err != nil {
				return nil, false, err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				if ns == old {
					keys = append(keys, rowkey.Key{id, []byte(ns)})
				} else {
					keys = append(keys, rowkey.Key{id, []byte(old)}, rowkey.Key{id, []byte(ns)})
				}
			}
		case 3:
			var old string
			if err := tx.QueryRow("SELECT s FROM t WHERE id = ? LIMIT 1 FOR UPDATE", id).Scan(&old); err == sql.ErrNoRows {
				continue
			} else if err != nil {
				return nil, false, err
			}
			if _, err := tx.Exec("DELETE FROM t WHERE id = ? AND s = CAST(? AS BINARY)", id, old); err != nil {
				return nil, false, err
			}
			keys = append(keys, rowkey.Key{id, []byte(old)})
		}
		time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
	}
	if r.IntN(6) == 0 {
		return keys, false, tx.Rollback()
	}
	return keys, true, tx.Commit()
}

var _ binlog.PresenceSink = (*sink)(nil)

// TestNamesOfLongTables: names stay within 64 characters, and two long table
// names that share their first 57 characters get names of their own.
func TestNamesOfLongTables(t *testing.T) {
	long := strings.Repeat("x", 60)
	a, ta := Names(long + "a")
	b, tb := Names(long + "b")
	if a == b || ta == tb {
		t.Fatalf("%s and %s collide", long+"a", long+"b")
	}
	for _, n := range append([]string{a, b}, append(ta[:], tb[:]...)...) {
		if len([]rune(n)) > 64 {
			t.Errorf("%s is %d characters", n, len([]rune(n)))
		}
	}
	if q, trs := Names("orders"); q != "_orders_chg" || trs != [3]string{"_orders_chg_i", "_orders_chg_u", "_orders_chg_d"} {
		t.Errorf("Names(orders) = %s %v", q, trs)
	}
}

// TestKeyNamedLikeTheQueue: a key column named like one of the queue's own
// columns is refused (the queue could not be made).
func TestKeyNamedLikeTheQueue(t *testing.T) {
	for _, name := range []string{SeqColumn, LogColumn, "_SLUICE_LOG"} {
		tbl := &schema.Table{Name: "t", Columns: []schema.Column{{Name: name, DataType: "int", ColumnType: "int"}}, PrimaryKey: []string{name}}
		key, err := rowkey.NewCols(tbl.PKColumns())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(tbl, key, "t"); !errors.Is(err, ErrKeyType) {
			t.Errorf("key column %s: %v, want ErrKeyType", name, err)
		}
	}
}
