#!/usr/bin/env bash
# Starts and stops dynalite, the DynamoDB-compatible server of the
# integration tests, on a free loopback port.
#
#   tools/dynalite/run.sh start STATE_DIR   installs the pinned dynalite (npm ci),
#                                            starts it, waits until GET / answers
#                                            200, prints its endpoint URL
#   tools/dynalite/run.sh stop STATE_DIR    stops the server started there, by PID
#
# STATE_DIR holds the PID, the port and the server's log. dynalite's cli.js
# is started with node directly, through serve.js, which keeps it up when a
# client aborts a request (see there): killing an npx wrapper would leave
# the server running.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:-}"
state="${2:-}"
if [[ -z "$cmd" || -z "$state" ]]; then
	echo "usage: $0 start|stop STATE_DIR" >&2
	exit 2
fi

# http_status URL prints the HTTP status of GET URL, or 000 when nothing answers.
http_status() {
	node -e '
		const req = require("http").get(process.argv[1], (res) => { console.log(res.statusCode); res.resume(); });
		req.setTimeout(1000, () => req.destroy());
		req.on("error", () => console.log("000"));
	' "$1"
}

# free_port prints a TCP port that is free on 127.0.0.1 right now.
# (dynalite treats --port 0 as its default 4567, so it cannot pick one itself.)
free_port() {
	node -e '
		const s = require("net").createServer();
		s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });
	'
}

stop() {
	[[ -f "$state/pid" ]] || return 0
	local pid
	pid="$(cat "$state/pid")"
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "dynalite (pid $pid) ignored SIGTERM; sending SIGKILL" >&2
			kill -9 "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$state/pid" "$state/port"
}

start() {
	mkdir -p "$state"
	stop # a server left over from an interrupted run
	# npm ci empties node_modules first: skip it when the lock file is the one
	# installed, so that a second start does not pull the modules from under
	# a server that is running.
	if ! cmp -s "$here/package-lock.json" "$here/node_modules/.installed-lock.json"; then
		(cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >&2
		cp "$here/package-lock.json" "$here/node_modules/.installed-lock.json"
	fi

	local attempt port pid
	for attempt in 1 2 3; do
		port="$(free_port)"
		node "$here/serve.js" --host 127.0.0.1 --port "$port" \
			--createTableMs 0 --deleteTableMs 0 --updateTableMs 0 \
			>"$state/dynalite.log" 2>&1 </dev/null &
		pid=$!
		echo "$pid" >"$state/pid"
		echo "$port" >"$state/port"
		for _ in $(seq 300); do # up to 30 s
			if ! kill -0 "$pid" 2>/dev/null; then
				break # exited, perhaps because another process took the port
			fi
			if [[ "$(http_status "http://127.0.0.1:$port/")" == 200 ]]; then
				echo "http://127.0.0.1:$port"
				return 0
			fi
			sleep 0.1
		done
		echo "dynalite did not answer on port $port (try $attempt); log:" >&2
		cat "$state/dynalite.log" >&2 || true
		stop
	done
	echo "dynalite failed to start" >&2
	return 1
}

case "$cmd" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop STATE_DIR" >&2
	exit 2
	;;
esac
