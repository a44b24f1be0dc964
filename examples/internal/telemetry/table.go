package telemetry

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Row is one instrument's data point: its value for one set of attributes.
type Row struct {
	Scope, Instrument, Unit string
	Attributes              attribute.Set
	// Value is a counter's sum or a gauge's last value; for a histogram,
	// the number of recordings.
	Value float64
	// Histogram is true for a histogram, whose recordings add up to Sum
	// and peak at Max.
	Histogram bool
	Sum, Max  float64
}

// Attr returns the value of attribute key, and whether the row has it.
func (r Row) Attr(key string) (string, bool) {
	v, ok := r.Attributes.Value(attribute.Key(key))
	return v.Emit(), ok
}

// Rows flattens rm into one Row per data point of the retryer's instruments
// and of SDKInstruments, in a stable order: the SDK's first, then the
// retryer's, each in the order of the constants above, then by attributes.
func Rows(rm metricdata.ResourceMetrics) []Row {
	var rows []Row
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sm.Scope.Name != RetryerScope && !slices.Contains(SDKInstruments, m.Name) {
				continue
			}
			rows = append(rows, points(sm.Scope.Name, m)...)
		}
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		if c := order(a.Instrument) - order(b.Instrument); c != 0 {
			return c
		}
		return strings.Compare(attrString(a.Attributes), attrString(b.Attributes))
	})
	return rows
}

var instrumentOrder = []string{
	CallAttempts, CallErrors, CallAttemptDuration,
	Retries, Backoff, GiveUps, BucketTokens, SendRateLimit, SendRateWait, DeadlineSkipped,
}

func order(name string) int {
	if i := slices.Index(instrumentOrder, name); i >= 0 {
		return i
	}
	return len(instrumentOrder)
}

func points(scope string, m metricdata.Metrics) []Row {
	row := func(attrs attribute.Set) Row {
		return Row{Scope: scope, Instrument: m.Name, Unit: m.Unit, Attributes: attrs}
	}
	var rows []Row
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		rows = valueRows(d.DataPoints, row)
	case metricdata.Sum[float64]:
		rows = valueRows(d.DataPoints, row)
	case metricdata.Gauge[int64]:
		rows = valueRows(d.DataPoints, row)
	case metricdata.Gauge[float64]:
		rows = valueRows(d.DataPoints, row)
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			r := row(p.Attributes)
			r.Histogram, r.Value, r.Sum = true, float64(p.Count), p.Sum
			r.Max, _ = p.Max.Value()
			rows = append(rows, r)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			r := row(p.Attributes)
			r.Histogram, r.Value, r.Sum = true, float64(p.Count), float64(p.Sum)
			mx, _ := p.Max.Value()
			r.Max = float64(mx)
			rows = append(rows, r)
		}
	}
	return rows
}

// WriteTable writes rows as an aligned table: instrument, unit, attributes
// and value. Two attributes that would repeat on almost every row are left
// out: rpc.service (DynamoDB on every SDK operation's row) and the
// retryer's jitterretry.partition when it is "" (not partitioned).
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "instrument\tunit\tattributes\tvalue")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Instrument, r.Unit, shownAttrs(r.Attributes), r.value())
	}
	return tw.Flush()
}

func shownAttrs(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		switch {
		case kv.Key == "rpc.service":
		case kv.Key == "jitterretry.partition" && kv.Value.Emit() == "":
		default:
			parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func attrString(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(parts, ",")
}

func (r Row) value() string {
	if !r.Histogram {
		return strconv.FormatFloat(r.Value, 'f', -1, 64)
	}
	mean := 0.0
	if r.Value > 0 {
		mean = r.Sum / r.Value
	}
	return fmt.Sprintf("n=%d mean=%s max=%s", int64(r.Value), r.format(mean), r.format(r.Max))
}

// format writes a value in the row's unit, seconds as a rounded duration.
func (r Row) format(v float64) string {
	if r.Unit != "s" {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	d := time.Duration(v * float64(time.Second))
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// valueRows makes a row of each data point of a sum or a gauge, whatever
// its number type.
func valueRows[N int64 | float64](points []metricdata.DataPoint[N], row func(attribute.Set) Row) []Row {
	rows := make([]Row, 0, len(points))
	for _, p := range points {
		r := row(p.Attributes)
		r.Value = float64(p.Value)
		rows = append(rows, r)
	}
	return rows
}
