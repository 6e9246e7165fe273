// Command gateway is the local site's stand-in for the Gateway's Envoy: an HTTP/1.1 proxy that asks the EPP
// (the llm-d Endpoint Picker) where each request goes, over Envoy's ext_proc protocol, the way upstream's Envoy
// configuration for the EPP does (gateway-api-inference-extension test/testdata/envoy.yaml: ext_proc with
// request and response headers SEND, bodies FULL_DUPLEX_STREAMED, an ORIGINAL_DST cluster routed by the
// x-gateway-destination-endpoint header, TLS to the EPP without verification). It is NOT Envoy: no routes,
// retries, HTTP/2 or trailers, and only the ext_proc behaviour the EPP relies on (extproc.go).
//
//	gateway --listen 127.0.0.1:8080 --epp 127.0.0.1:9002
//	gateway --listen-fd 3 --epp 10.1.0.7:9002 --failure-mode FailOpen --fallback-endpoints 10.1.0.8:8000
//	gateway --listen-fd 3 --epp-endpoints-file /run/epp-endpoints --failure-mode FailOpen --fallback-endpoints-file /run/pool
//
// One line per request goes to stderr. Two response headers are the stand-in's own, for tests:
// x-gateway-destination-endpoint (the endpoint the request was sent to) and x-gateway-prefiller-host-port (the
// prefill endpoint the EPP set in x-prefiller-host-port, when it set one).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	destinationHeader = "x-gateway-destination-endpoint" // the EPP's pick (GIE's endpoint picker protocol)
	prefillHeader     = "x-prefiller-host-port"          // the llm-d P/D decision, read by the decode sidecar
	usedPrefillHeader = "x-gateway-prefiller-host-port"  // the stand-in's own, for tests
	maxRequestBody    = 64 << 20                         // a 200k-token prompt is ~1 MB of JSON
)

type config struct {
	listen        string
	listenFD      int
	epp           string
	eppFile       string // the EPP Service's ready endpoints, one HOST:PORT a line (instead of --epp)
	eppPlaintext  bool
	failOpen      bool
	fallbacks     []string
	fallbackFile  string // the pool's ready endpoints for FailOpen, one HOST:PORT a line (instead of --fallback-endpoints)
	statusOnError int
}

func parseFlags(args []string) (config, error) {
	var c config
	var mode, fallbacks string
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", "", "address to listen on for HTTP/1.1 clients, e.g. 127.0.0.1:8080")
	fs.IntVar(&c.listenFD, "listen-fd", -1, "an inherited listening socket's file descriptor (instead of --listen)")
	fs.StringVar(&c.epp, "epp", "", "the EPP's ext_proc gRPC address HOST:PORT")
	fs.StringVar(&c.eppFile, "epp-endpoints-file", "",
		"instead of --epp: a file listing the EPP Service's ready endpoints, HOST:PORT a line, read again when it changes")
	fs.BoolVar(&c.eppPlaintext, "epp-plaintext", false, "plaintext gRPC to the EPP (default: TLS without verification)")
	fs.StringVar(&mode, "failure-mode", "FailClose", "the InferencePool's failureMode: FailClose or FailOpen")
	fs.StringVar(&fallbacks, "fallback-endpoints", "", "HOST:PORT,... used when the EPP fails and --failure-mode is FailOpen")
	fs.StringVar(&c.fallbackFile, "fallback-endpoints-file", "",
		"instead of --fallback-endpoints: a file listing the pool's ready endpoints, HOST:PORT a line, read again when it changes")
	fs.IntVar(&c.statusOnError, "status-on-error", http.StatusInternalServerError,
		"HTTP status when the EPP fails and --failure-mode is FailClose (Envoy ext_proc's status_on_error)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if (c.listen == "") == (c.listenFD < 0) {
		return c, errors.New("give exactly one of --listen and --listen-fd")
	}
	if (c.epp == "") == (c.eppFile == "") {
		return c, errors.New("give exactly one of --epp and --epp-endpoints-file")
	}
	switch mode {
	case "FailClose":
	case "FailOpen":
		c.failOpen = true
	default:
		return c, fmt.Errorf("--failure-mode: %q is neither FailClose nor FailOpen", mode)
	}
	for _, e := range strings.Split(fallbacks, ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.fallbacks = append(c.fallbacks, e)
		}
	}
	if len(c.fallbacks) > 0 && c.fallbackFile != "" {
		return c, errors.New("give at most one of --fallback-endpoints and --fallback-endpoints-file")
	}
	if c.failOpen && len(c.fallbacks) == 0 && c.fallbackFile == "" {
		return c, errors.New("--failure-mode FailOpen needs --fallback-endpoints or --fallback-endpoints-file")
	}
	if c.statusOnError < 200 || c.statusOnError > 599 {
		return c, fmt.Errorf("--status-on-error: %d is not an HTTP status", c.statusOnError)
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(2)
	}
	ln, err := listener(c)
	if err != nil {
		log.Fatalf("gateway: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, c, ln); err != nil {
		log.Fatalf("gateway: %v", err)
	}
}

// listener: --listen, or the socket a caller created (in another network namespace) and passed as fd N.
func listener(c config) (net.Listener, error) {
	if c.listenFD < 0 {
		return net.Listen("tcp", c.listen)
	}
	f := os.NewFile(uintptr(c.listenFD), "listen-fd")
	if f == nil {
		return nil, fmt.Errorf("--listen-fd %d is not an open file", c.listenFD)
	}
	defer f.Close() // FileListener dups it
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("--listen-fd %d: %w", c.listenFD, err)
	}
	return ln, nil
}

// run serves on ln until ctx ends, then stops gracefully: no new connections, requests in flight finish (up to
// 10 s), then the EPP connection closes.
func run(ctx context.Context, c config, ln net.Listener) error {
	g, err := newGateway(c)
	if err != nil {
		return err
	}
	defer g.conn.Close()
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}
	if c.eppFile != "" {
		// Read once before serving: a request that came before the first poll found no endpoint and failed.
		g.endpoints.file.read(c.eppFile)
		go g.endpoints.file.follow(ctx, c.eppFile)
	}
	if c.fallbackFile != "" {
		g.fallbacks.file.read(c.fallbackFile)
		go g.fallbacks.file.follow(ctx, c.fallbackFile)
	}
	log.Printf("gateway: listening on %s, EPP %s (%s, %s)", ln.Addr(), c.epp+c.eppFile, map[bool]string{true: "plaintext", false: "TLS"}[c.eppPlaintext],
		map[bool]string{true: "FailOpen", false: "FailClose"}[c.failOpen])
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	log.Printf("gateway: stopped")
	return err
}

type gateway struct {
	conn          *grpc.ClientConn
	endpoints     *eppEndpoints // with --epp-endpoints-file: the addresses the connection is given
	epp           extprocv3.ExternalProcessorClient
	upstream      *http.Transport
	failOpen      bool
	fallbacks     *fallbackEndpoints
	statusOnError int
}

func newGateway(c config) (*gateway, error) {
	creds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) // the EPP's self-signed cert has no SAN
	if c.eppPlaintext {
		creds = insecure.NewCredentials()
	}
	// One HTTP/2 connection for all streams, as Envoy's ext_proc cluster. Reconnect within a second once the EPP
	// is back (gRPC's default backoff grows to 2 minutes; Envoy's cluster retries sooner).
	options := []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})}
	target, endpoints := c.epp, (*eppEndpoints)(nil)
	if c.eppFile != "" {
		endpoints = newEppEndpoints()
		target = endpoints.target()
		options = append(options, grpc.WithResolvers(endpoints.resolver))
	}
	conn, err := grpc.NewClient(target, options...)
	if err != nil {
		return nil, err
	}
	return &gateway{
		conn:      conn,
		endpoints: endpoints,
		epp:       extprocv3.NewExternalProcessorClient(conn),
		// A pooled HTTP/1.1 client to the pods; never a proxy from the environment, no transparent gzip.
		upstream: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 128,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		failOpen:      c.failOpen,
		fallbacks:     newFallbackEndpoints(c.fallbacks),
		statusOnError: c.statusOnError,
	}, nil
}

// record is what the request's log line says.
type record struct {
	status      int
	destination string
	prefill     string
	note        string
	start       time.Time
	picked      time.Duration // from the request's arrival to the EPP's pick (its request phase)
	answered    time.Duration // from the arrival to the upstream's response headers
	bodyRead    atomic.Int64  // from the arrival to the upstream body's end (ns), set by the body's goroutine
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &record{start: start}
	defer func() {
		line := fmt.Sprintf("gateway: %s %s %d dest=%s prefill=%s %.1fms (picked %.1fms, answered %.1fms, body %.1fms)",
			r.Method, r.URL.RequestURI(), rec.status, orDash(rec.destination), orDash(rec.prefill),
			milliseconds(time.Since(start)), milliseconds(rec.picked), milliseconds(rec.answered),
			milliseconds(time.Duration(rec.bodyRead.Load())))
		if rec.note != "" {
			line += " (" + rec.note + ")"
		}
		log.Print(line)
	}()
	g.serve(w, r, rec)
}

func milliseconds(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fail answers the client with a status of the stand-in's own (no EPP answer to pass on).
func fail(w http.ResponseWriter, rec *record, status int, format string, args ...any) {
	rec.status, rec.note = status, fmt.Sprintf(format, args...)
	w.Header().Set("content-type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintln(w, "gateway: "+rec.note)
}

// eppFailed applies the pool's failureMode to an EPP that cannot be reached or broke the stream before a
// destination was chosen: FailClose answers --status-on-error (Envoy's ext_proc with failure_mode_allow false
// sends a local reply, 500 by default); FailOpen forwards the client's request unchanged to a fallback endpoint.
func (g *gateway) eppFailed(w http.ResponseWriter, r *http.Request, rec *record, body []byte, err error) {
	if !g.failOpen {
		fail(w, rec, g.statusOnError, "the EPP failed: %v", err)
		return
	}
	dest := g.fallbacks.pick()
	rec.note = fmt.Sprintf("FailOpen: the EPP failed: %v", err)
	if dest == "" { // Envoy's "no healthy upstream"
		fail(w, rec, http.StatusServiceUnavailable, "FailOpen: the EPP failed (%v) and the pool has no ready endpoint", err)
		return
	}
	header := r.Header.Clone()
	removeHopByHop(header)
	resp, err := g.forward(r, dest, r.URL.RequestURI(), header, body)
	rec.destination = dest
	if err != nil {
		fail(w, rec, http.StatusServiceUnavailable, "upstream connect error to %s: %v", dest, err)
		return
	}
	defer resp.Body.Close()
	copyHeader(w.Header(), resp.Header)
	w.Header().Set(destinationHeader, dest)
	rec.status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)
	copyBody(w, resp.Body)
}

// forward sends the (mutated) request to dest over the pooled HTTP/1.1 transport; the body is whole, so its
// Content-Length is recomputed (the EPP may have rewritten it).
func (g *gateway) forward(r *http.Request, dest, uri string, header http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+dest+uri, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header
	req.Header.Del("content-length")
	req.ContentLength = int64(len(body))
	req.Host = r.Host // as Envoy's ORIGINAL_DST cluster: the authority is the client's
	return g.upstream.RoundTrip(req)
}

// copyBody streams an unprocessed body to the client, flushing each read (SSE).
func copyBody(w http.ResponseWriter, body interface{ Read([]byte) (int, error) }) {
	buf := make([]byte, 32<<10)
	flusher, _ := w.(http.Flusher)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// Hop-by-hop headers (RFC 9110 7.6.1) are the connection's, not the request's: Envoy drops them too.
var hopByHop = []string{"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
	"trailer", "transfer-encoding", "upgrade"}

func removeHopByHop(h http.Header) {
	for _, f := range h.Values("connection") {
		for _, k := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(k))
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}
