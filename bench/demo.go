package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/migration"
)

// Demo creates demo.orders on the sandbox, starts writers that insert, update
// and delete rows, migrates the table with sluice while they run, and then
// checks that every row the writers left is in the new table: each writer
// records the final state of the rows it owns.
func Demo(ctx context.Context, dsn string, rows, writers int, out io.Writer) error {
	s, err := Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer s.DB.Close()
	fmt.Fprintf(out, "demo: creating demo.orders with %d rows\n", rows)
	for _, q := range []string{
		"DROP DATABASE IF EXISTS demo", "CREATE DATABASE demo",
		`CREATE TABLE demo.orders (id BIGINT NOT NULL PRIMARY KEY, customer INT NOT NULL, amount DECIMAL(12,2) NOT NULL,
			status VARCHAR(20) NOT NULL, note TEXT, created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), KEY (customer))`,
	} {
		if _, err := s.DB.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for lo := 1; lo <= rows; lo += 1000 { // 1,000 rows: within the default cte_max_recursion_depth
		hi := min(lo+999, rows)
		q := fmt.Sprintf(`INSERT INTO demo.orders (id, customer, amount, status, note)
			SELECT n, n %% 5000, (n %% 100000) / 100, ELT(1 + n %% 3, 'new', 'paid', 'shipped'), REPEAT('x', n %% 200)
			FROM (WITH RECURSIVE s(n) AS (SELECT %d UNION ALL SELECT n + 1 FROM s WHERE n < %d) SELECT n FROM s) x`, lo, hi)
		if _, err := s.DB.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	db, err := dbconn.Open(ctx, s.Conn, "demo", writers+2)
	if err != nil {
		return err
	}
	defer db.Close()

	// Writer w owns ids with id % writers == w and remembers each one's
	// final amount (or that it was deleted).
	final := make([]map[int64]string, writers)
	var ops atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	var once sync.Once
	for w := 0; w < writers; w++ {
		final[w] = map[int64]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			next := int64(rows + 1 + w)
			for next%int64(writers) != int64(w) {
				next++
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := int64(1 + r.IntN(rows))
				id -= id % int64(writers)
				id += int64(w)
				if id < 1 || id > int64(rows) {
					continue
				}
				amount := fmt.Sprintf("%d.%02d", r.IntN(10000), r.IntN(100))
				var q string
				var args []any
				switch r.IntN(10) {
				case 0:
					q, args = "DELETE FROM orders WHERE id = ?", []any{id}
					final[w][id] = "deleted"
				case 1, 2:
					q, args = "INSERT INTO orders (id, customer, amount, status) VALUES (?, 1, ?, 'new')", []any{next, amount}
					final[w][next] = amount
					next += int64(writers)
				default:
					if final[w][id] == "deleted" {
						continue
					}
					q, args = "UPDATE orders SET amount = ?, status = 'paid' WHERE id = ?", []any{amount, id}
					final[w][id] = amount
				}
				if _, err := db.ExecContext(ctx, q, args...); err != nil {
					once.Do(func() { werr = err })
					return
				}
				ops.Add(1)
			}
		}()
	}

	alter := "ADD COLUMN currency CHAR(3) NOT NULL DEFAULT 'EUR', MODIFY customer BIGINT NOT NULL, ADD INDEX by_status (status, created_at)"
	fmt.Fprintf(out, "demo: %d writers are changing demo.orders; migrating it with:\n  sluice migrate --database demo --table orders --alter %q\n\n", writers, alter)
	log := slog.New(slog.NewTextHandler(out, nil))
	r, err := migration.New(migration.Config{
		Conn: s.Conn, Database: "demo", Table: "orders", Alter: alter, Logger: log, ProgressInterval: time.Second,
	})
	if err != nil {
		close(stop)
		wg.Wait()
		return err
	}
	start := ops.Load()
	res, err := r.Run(ctx)
	during := ops.Load() - start
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("a writer failed: %w", werr)
	}
	fmt.Fprintf(out, "\ndemo: migrated in %s while the writers made %d changes (%d of them reached the new table through the binlog); tables were locked %s for the swap\n",
		res.Total.Round(time.Millisecond), during, res.KeysApplied, res.CutoverLock.Round(time.Millisecond))

	// Check every row the writers touched against what they wrote last.
	checked, bad := 0, 0
	for _, m := range final {
		for id, want := range m {
			var got string
			err := db.QueryRowContext(ctx, "SELECT amount FROM orders WHERE id = ?", id).Scan(&got)
			if want == "deleted" {
				if err == nil {
					bad++
				}
			} else if err != nil || got != want {
				bad++
			}
			checked++
		}
	}
	var ddl, name string
	db.QueryRowContext(ctx, "SHOW CREATE TABLE orders").Scan(&name, &ddl)
	fmt.Fprintf(out, "demo: checked the final state of %d rows the writers touched: %d wrong\n\n%s\n", checked, bad, ddl)
	if bad > 0 {
		return fmt.Errorf("%d rows do not hold what the writers wrote last", bad)
	}
	return nil
}
