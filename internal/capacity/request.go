package capacity

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Kind says which of a table's buckets an operation draws from.
type Kind int

const (
	// Unmetered operations (the control plane, and anything the proxy does
	// not know) are forwarded without a capacity check or error injection.
	Unmetered Kind = iota
	// Read operations draw from the table's read capacity.
	Read
	// Write operations draw from the table's write capacity.
	Write
)

func (k Kind) String() string {
	switch k {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "unmetered"
}

// kinds maps the operation names of X-Amz-Target to what they consume.
var kinds = map[string]Kind{
	"GetItem":            Read,
	"Query":              Read,
	"Scan":               Read,
	"BatchGetItem":       Read,
	"TransactGetItems":   Read,
	"PutItem":            Write,
	"UpdateItem":         Write,
	"DeleteItem":         Write,
	"BatchWriteItem":     Write,
	"TransactWriteItems": Write,
}

// transactionFactor is what DynamoDB charges a transactional item compared
// with a plain one.
const transactionFactor = 2

// Cost is the capacity one request consumes from one table.
type Cost struct {
	Table string
	Units int
}

// Request is what the proxy needs to know about one DynamoDB request.
type Request struct {
	// Operation is the name after the dot of X-Amz-Target, such as
	// "UpdateItem"; empty when the header is missing.
	Operation string
	// Kind is the bucket the operation draws from.
	Kind Kind
	// Costs lists the units taken from each table, sorted by table name,
	// one entry per table. Empty for unmetered operations.
	Costs []Cost
}

// ParseRequest reads the operation from the X-Amz-Target header value and the
// tables and units from the JSON body. An unmetered operation is never an
// error; a metered one whose body names no table is.
func ParseRequest(target string, body []byte) (Request, error) {
	op := target
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		op = target[i+1:]
	}
	req := Request{Operation: op, Kind: kinds[op]}
	if req.Kind == Unmetered {
		return req, nil
	}
	var in struct {
		TableName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return req, fmt.Errorf("capacity: cannot parse %s request body: %w", op, err)
	}
	units := map[string]int{}
	switch {
	case in.TableName != "":
		units[in.TableName] = 1
	case len(in.RequestItems) > 0:
		for table, raw := range in.RequestItems {
			n, err := batchItems(op, raw)
			if err != nil {
				return req, err
			}
			units[table] += n
		}
	case len(in.TransactItems) > 0:
		for _, item := range in.TransactItems {
			for _, action := range item {
				units[action.TableName] += transactionFactor
			}
		}
	}
	delete(units, "")
	if len(units) == 0 {
		return req, fmt.Errorf("capacity: %s request names no table", op)
	}
	for table, n := range units {
		req.Costs = append(req.Costs, Cost{Table: table, Units: max(n, 1)})
	}
	sort.Slice(req.Costs, func(i, j int) bool { return req.Costs[i].Table < req.Costs[j].Table })
	return req, nil
}

// batchItems counts the items of one table's entry of RequestItems: a list
// of write requests for BatchWriteItem, an object with Keys for BatchGetItem.
func batchItems(op string, raw json.RawMessage) (int, error) {
	if op == "BatchGetItem" {
		var get struct{ Keys []json.RawMessage }
		if err := json.Unmarshal(raw, &get); err != nil {
			return 0, fmt.Errorf("capacity: cannot parse %s RequestItems: %w", op, err)
		}
		return len(get.Keys), nil
	}
	var writes []json.RawMessage
	if err := json.Unmarshal(raw, &writes); err != nil {
		return 0, fmt.Errorf("capacity: cannot parse %s RequestItems: %w", op, err)
	}
	return len(writes), nil
}
