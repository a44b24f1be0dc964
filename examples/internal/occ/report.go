package occ

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Row is one strategy's line of the report: the workers' view (Result),
// the proxy's counts and the final check.
type Row struct {
	Strategy string
	// Successes is the acknowledged increments.
	Successes int64
	// Calls is every request the table received, throttled ones included.
	Calls int64
	// Conflicts is the condition failures caused by other workers.
	Conflicts int64
	// Throttles is the requests answered with
	// ProvisionedThroughputExceededException.
	Throttles int64
	// Refused is the retries refused by the retry token bucket.
	Refused int64
	// GaveUp is the times Do gave up and the increment was requeued.
	GaveUp int64
	// Recognised is the increments recognised by their token after a lost
	// response.
	Recognised int64
	P50, P99   time.Duration
	Wall       time.Duration
	Check      Check
}

// NewRow fills a Row from a run's Result, its policy and its check; the
// caller adds Calls and Throttles from the capacity proxy.
func NewRow(p *Policy, res *Result, c Check) Row {
	return Row{
		Strategy:   p.Name,
		Successes:  res.Successes,
		Conflicts:  res.Conflicts,
		Refused:    p.Refused(),
		GaveUp:     res.GaveUp,
		Recognised: res.Recognised,
		P50:        res.Percentile(50),
		P99:        res.Percentile(99),
		Wall:       res.Wall,
		Check:      c,
	}
}

// WriteTable writes rows as an aligned table.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tsuccesses\tcalls\tconflicts\tthrottles\trefused\trequeued\trecognised\tp50\tp99\twall\tcheck\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n",
			r.Strategy, r.Successes, r.Calls, r.Conflicts, r.Throttles, r.Refused, r.GaveUp, r.Recognised,
			round(r.P50), round(r.P99), round(r.Wall), r.Check)
	}
	return tw.Flush()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
