package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// network draws one-way message delays |Normal(mean, sd)|, as the blog's
// simulator does. It is not safe for concurrent use; each run owns one.
type network struct {
	mean, sd float64 // nanoseconds
	rng      *rand.Rand
}

func newNetwork(mean, sd time.Duration, rng *rand.Rand) *network {
	return &network{mean: float64(mean), sd: float64(sd), rng: rng}
}

// delay returns the time one message takes.
func (n *network) delay() time.Duration {
	return time.Duration(math.Abs(n.mean + n.sd*n.rng.NormFloat64()))
}
