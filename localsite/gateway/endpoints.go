package main

import (
	"bytes"
	"context"
	"log"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// How often --epp-endpoints-file is read again: the site rewrites it within its own poll (0.5 s) of a change.
const endpointsPoll = 100 * time.Millisecond

// eppEndpoints gives the EPP connection the addresses the EPP Service has ready, as Envoy's EDS cluster for the
// ext_proc service gets them from the EndpointSlices: an endpoint that leaves the list (its pod is terminating or
// no longer Ready) gets no new stream, and its connection closes gracefully once its streams are done (gRPC
// drains a removed address: GOAWAY, streams in flight finish), while new streams go to an endpoint still listed.
// No endpoint listed: new streams fail at once (as connecting to a Service without endpoints is refused).
type eppEndpoints struct {
	resolver *manual.Resolver
	last     []byte
}

func newEppEndpoints() *eppEndpoints {
	r := manual.NewBuilderWithScheme("eppendpoints")
	e := &eppEndpoints{resolver: r}
	r.InitialState(resolver.State{})
	return e
}

func (e *eppEndpoints) target() string { return e.resolver.Scheme() + ":///epp" }

// follow reads path now and whenever its content changes, until ctx ends.
func (e *eppEndpoints) follow(ctx context.Context, path string) {
	followFile(ctx, path, &e.last, e.apply)
}

func (e *eppEndpoints) read(path string) { readFile(path, &e.last, e.apply) }

func (e *eppEndpoints) apply(addresses []string) {
	state := resolver.State{}
	for _, a := range addresses {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	log.Printf("gateway: EPP endpoints %v", addresses)
	e.resolver.UpdateState(state)
}

// fallbackEndpoints are where FailOpen sends a request the EPP could not route: the pool's ready endpoints, as the
// gateway's own load balancing over the InferencePool's Service has them (Envoy: its EDS cluster), round robin.
// Followed from a file like the EPP's, so a pod that comes or goes needs no restart of the gateway.
type fallbackEndpoints struct {
	list atomic.Pointer[[]string]
	next atomic.Uint64
	last []byte
}

func newFallbackEndpoints(fixed []string) *fallbackEndpoints {
	f := &fallbackEndpoints{}
	f.list.Store(&fixed)
	return f
}

// pick: the next endpoint, or "" when there is none (every pod of the pool gone or not Ready).
func (f *fallbackEndpoints) pick() string {
	list := *f.list.Load()
	if len(list) == 0 {
		return ""
	}
	return list[f.next.Add(1)%uint64(len(list))]
}

func (f *fallbackEndpoints) follow(ctx context.Context, path string) {
	followFile(ctx, path, &f.last, f.apply)
}

func (f *fallbackEndpoints) read(path string) { readFile(path, &f.last, f.apply) }

func (f *fallbackEndpoints) apply(addresses []string) {
	log.Printf("gateway: FailOpen endpoints %v", addresses)
	f.list.Store(&addresses)
}

// followFile reads path now and every endpointsPoll, calling apply with its endpoints whenever its content differs
// from *last, until ctx ends.
func followFile(ctx context.Context, path string, last *[]byte, apply func([]string)) {
	ticker := time.NewTicker(endpointsPoll)
	defer ticker.Stop()
	for {
		readFile(path, last, apply)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// readFile calls apply with path's endpoints if its content differs from *last (a missing file lists none).
func readFile(path string, last *[]byte, apply func([]string)) {
	content, err := os.ReadFile(path)
	if err != nil {
		content = nil // no file yet: no endpoint
	}
	if *last != nil && bytes.Equal(content, *last) {
		return
	}
	*last = append([]byte{}, content...)
	apply(parseEndpoints(string(content)))
}

// parseEndpoints: HOST:PORT a line; blank lines and lines starting with # are skipped.
func parseEndpoints(content string) []string {
	var out []string
	for _, line := range strings.Split(content, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}
