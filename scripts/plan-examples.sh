#!/usr/bin/env bash
# Prints docs/PLANS.md: sluice plan's output for a dozen ALTERs of the
# benchmark's 1,000,000-row sysbench table on the sandbox (run make bench once
# first, which creates it). Usage: scripts/plan-examples.sh > docs/PLANS.md
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/sandbox.sh env)"
hostport=${SLUICE_TEST_DSN#*tcp(}; hostport=${hostport%%)*}
conn=(--host "${hostport%:*}" --port "${hostport#*:}" --user root --database sbtest --table sbtest1)

echo "# sluice plan: examples"
echo
echo "Output of \`sluice plan\` for the benchmark's 1,000,000-row sysbench table"
echo "(\`id INT PRIMARY KEY, k INT NOT NULL DEFAULT 0, c CHAR(120), pad CHAR(60), KEY k_1 (k)\`)"
echo "on the 2-core MySQL 9.7 sandbox. Regenerate with \`scripts/plan-examples.sh > docs/PLANS.md\`."
while IFS='|' read -r alter extra; do
	echo
	echo "## \`$alter\`${extra:+ with \`$extra\`}"
	echo
	echo '```'
	# shellcheck disable=SC2086
	bin/sluice plan "${conn[@]}" --alter "$alter" $extra 2>&1
	echo '```'
done <<'LIST'
ADD COLUMN note VARCHAR(64)
DROP COLUMN pad
RENAME COLUMN c TO body
ALTER COLUMN k SET DEFAULT 5
ADD INDEX c_k (c, k)
ADD INDEX c_k (c, k)|--replicas --max-inplace-seconds 1s
ADD INDEX idx_c (c), ADD INDEX idx_pad (pad), DROP INDEX k_1
ADD UNIQUE KEY u_k (k)
MODIFY k BIGINT NOT NULL DEFAULT 0
MODIFY c CHAR(60) NOT NULL DEFAULT ''
MODIFY k INT NULL
ENGINE=InnoDB
ADD COLUMN id2 BIGINT AS (id * 2) STORED
ADD COLUMN note VARCHAR(64), ADD INDEX note_k (note, k)
LIST
