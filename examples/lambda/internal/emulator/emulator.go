//go:build linux

// Package emulator runs the Lambda function of examples/lambda, built as a
// bootstrap, under the AWS Lambda Runtime Interface Emulator
// (github.com/aws/aws-lambda-runtime-interface-emulator, pinned as a tool
// of the examples module), and drives a scenario of many invocations
// against DynamoDB behind throttling and network faults. The function's
// test and `make lambda` run the same scenario.
//
// The emulator runs one invocation at a time: a second request while one
// is running crashes it (a nil pointer dereference in its rapidcore server,
// as of the pinned version), as Lambda runs one invocation at a time per
// execution environment. So each Emulator stands for one execution
// environment, and a scenario runs several side by side for concurrency,
// as Lambda scales out.
//
// The emulator supports Linux only.
package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Module paths of what Build builds.
const (
	functionPackage = "github.com/jitterretry/jitterretry/examples/lambda"
	emulatorPackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
)

// Binaries are the paths of a built function and emulator.
type Binaries struct {
	// Bootstrap is the function, built as Lambda's custom runtimes name it.
	Bootstrap string
	// Emulator is aws-lambda-rie.
	Emulator string
}

// Build builds the function (with the race detector when race is set) as
// dir/bootstrap and the emulator as dir/aws-lambda-rie, with the go command
// of the toolchain running the caller, from the module proxy's pinned
// versions (the emulator is a tool of the examples module). It runs from
// inside the examples module (a test's directory, or the workspace root).
func Build(ctx context.Context, dir string, race bool) (Binaries, error) {
	b := Binaries{Bootstrap: filepath.Join(dir, "bootstrap"), Emulator: filepath.Join(dir, "aws-lambda-rie")}
	args := []string{"build", "-o", b.Bootstrap}
	if race {
		args = append(args, "-race")
	}
	if err := goCommand(ctx, append(args, functionPackage)...); err != nil {
		return Binaries{}, fmt.Errorf("emulator: build the function: %w", err)
	}
	if err := goCommand(ctx, "build", "-o", b.Emulator, emulatorPackage); err != nil {
		return Binaries{}, fmt.Errorf("emulator: build the emulator: %w", err)
	}
	return b, nil
}

func goCommand(ctx context.Context, args ...string) error {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	cmd := exec.CommandContext(ctx, gobin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

// Config configures an Emulator.
type Config struct {
	Binaries
	// Timeout is the function's timeout, in whole seconds
	// (AWS_LAMBDA_FUNCTION_TIMEOUT): the deadline of each invocation's
	// context, counted from the invocation's start.
	Timeout int
	// Env is the function's environment besides the timeout, as
	// "NAME=value". The emulator passes its own environment on to the
	// function, and is given only this one: nothing of the caller's (such
	// as an AWS_ENDPOINT_URL_DYNAMODB or real credentials) leaks in.
	Env []string
}

// Emulator is one running aws-lambda-rie process with the function: one
// execution environment. Invoke it one invocation at a time.
type Emulator struct {
	url  string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // the process's exit, once done is closed

	closeOnce sync.Once
}

// Start starts an emulator for cfg on free loopback ports, and waits until
// it accepts invocations. The function itself starts with the first
// invocation, as in Lambda.
func Start(ctx context.Context, cfg Config) (*Emulator, error) {
	if cfg.Timeout < 1 {
		return nil, fmt.Errorf("emulator: timeout %d s: want a whole number of seconds, at least 1", cfg.Timeout)
	}
	var err error
	for range 3 { // a port picked free can be taken before the emulator binds it
		var ports []int
		if ports, err = freePorts(2); err != nil {
			return nil, err
		}
		var e *Emulator
		if e, err = start(ctx, cfg, ports); err == nil {
			return e, nil
		}
	}
	return nil, err
}

// start starts an emulator whose invocations and runtime API listen on the
// loopback ports given, and waits until both are up.
func start(ctx context.Context, cfg Config, ports []int) (*Emulator, error) {
	invokeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	apiAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	cmd := exec.Command(cfg.Emulator,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", apiAddr,
		"--log-level", "warn", // the emulator's own INFO lines are not in CloudWatch
		cfg.Bootstrap)
	cmd.Dir = filepath.Dir(cfg.Bootstrap)
	cmd.Env = append([]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(cfg.Timeout),
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
	}, cfg.Env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that Close can end the function with it;
	// and ended with the caller's thread if the caller dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("emulator: start %s: %w", cfg.Emulator, err)
	}
	e := &Emulator{url: "http://" + invokeAddr + "/2015-03-31/functions/function/invocations", cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		e.err = cmd.Wait()
		close(e.done)
	}()
	if err := e.awaitListening(ctx, invokeAddr); err != nil {
		_ = e.Close()
		return nil, err
	}
	// The runtime API binds in a goroutine of its own, which panics when
	// its port was taken meanwhile, after the invoke address is up: dialing
	// that port would reach whoever took it, so watch the process instead.
	select {
	case <-e.done:
		return nil, fmt.Errorf("emulator: exited after listening on %s (%v); its output:\n%s", invokeAddr, e.err, e.out.String())
	case <-time.After(startSettle):
	}
	return e, nil
}

// startSettle is how long start watches a new emulator for an early exit:
// its runtime API's failure to bind comes within milliseconds.
const startSettle = 500 * time.Millisecond

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("emulator: find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (e *Emulator) awaitListening(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-e.done:
			return fmt.Errorf("emulator: exited before listening on %s (%v); its output:\n%s", addr, e.err, e.out.String())
		case <-ctx.Done():
			return fmt.Errorf("emulator: not listening on %s: %w; its output:\n%s", addr, ctx.Err(), e.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Response is the emulator's answer to one invocation.
type Response struct {
	// Status is the HTTP status: 200 also for a function error and for a
	// timeout, as Lambda's synchronous Invoke API.
	Status int
	// Body is the function's result, Lambda's error JSON, or the
	// emulator's "Task timed out after N.00 seconds".
	Body []byte
	// Elapsed is the time from sending the request to the end of the body,
	// as the caller saw it.
	Elapsed time.Duration
}

// Invoke invokes the function once with payload, under requestID (the
// emulator takes it from the X-Amzn-RequestId header, and the function sees
// it as its AwsRequestID). Invocations of one Emulator must not overlap.
func (e *Emulator) Invoke(ctx context.Context, requestID string, payload []byte) (Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		return Response{}, err
	}
	req.Header.Set("X-Amzn-RequestId", requestID)
	start := time.Now()
	resp, err := invokeClient.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("emulator: invoke %s: %w", requestID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("emulator: invoke %s: read the response: %w", requestID, err)
	}
	return Response{Status: resp.StatusCode, Body: body, Elapsed: time.Since(start)}, nil
}

// invokeClient sends invocations; one connection per emulator is enough,
// since invocations do not overlap. Each Close of an Emulator closes the
// idle connections.
var invokeClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}

// Output returns what the emulator and the function wrote so far: the
// emulator's START, END and REPORT lines, and the function's own output
// between them, as CloudWatch Logs shows a function's log stream.
func (e *Emulator) Output() string { return e.out.String() }

// Close stops the emulator, which stops the function (SIGTERM; SIGKILL to
// the emulator's process group, the function's too, after 5 s), and waits
// for it. It is idempotent; it
// returns an error only when the emulator did not stop.
func (e *Emulator) Close() error {
	var err error
	e.closeOnce.Do(func() {
		defer invokeClient.CloseIdleConnections()
		pid := e.cmd.Process.Pid
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL) // the group: the emulator and the function
			select {
			case <-e.done:
			case <-time.After(10 * time.Second):
				err = errors.New("emulator: still running 15 s after SIGTERM and SIGKILL")
			}
		}
	})
	return err
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
