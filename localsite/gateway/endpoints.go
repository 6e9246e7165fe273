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
	file     endpointsFile
}

func newEppEndpoints() *eppEndpoints {
	r := manual.NewBuilderWithScheme("eppendpoints")
	e := &eppEndpoints{resolver: r}
	e.file.apply = func(addresses []string) {
		state := resolver.State{}
		for _, a := range addresses {
			state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
		}
		log.Printf("gateway: EPP endpoints %v", addresses)
		r.UpdateState(state)
	}
	r.InitialState(resolver.State{})
	return e
}

func (e *eppEndpoints) target() string { return e.resolver.Scheme() + ":///epp" }

// fallbackEndpoints are where FailOpen sends a request the EPP could not route: the pool's ready endpoints, as the
// gateway's own load balancing over the InferencePool's Service has them (Envoy: its EDS cluster), round robin.
// Followed from a file like the EPP's, so a pod that comes or goes needs no restart of the gateway.
type fallbackEndpoints struct {
	list atomic.Pointer[[]string]
	next atomic.Uint64
	file endpointsFile
}

func newFallbackEndpoints(fixed []string) *fallbackEndpoints {
	f := &fallbackEndpoints{}
	f.list.Store(&fixed)
	f.file.apply = func(addresses []string) {
		log.Printf("gateway: FailOpen endpoints %v", addresses)
		f.list.Store(&addresses)
	}
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

// endpointsFile is a list of endpoints the site rewrites whole, one HOST:PORT a line: apply gets it each time its
// content changes.
type endpointsFile struct {
	apply func([]string)
	last  []byte
}

// follow reads path now and every endpointsPoll until ctx ends.
func (f *endpointsFile) follow(ctx context.Context, path string) {
	ticker := time.NewTicker(endpointsPoll)
	defer ticker.Stop()
	for {
		f.read(path)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// read calls apply with path's endpoints if its content changed since the last read (a missing file lists none).
func (f *endpointsFile) read(path string) {
	content, err := os.ReadFile(path)
	if err != nil {
		content = nil // no file yet: no endpoint
	}
	if f.last != nil && bytes.Equal(content, f.last) {
		return
	}
	f.last = append([]byte{}, content...)
	f.apply(parseEndpoints(string(content)))
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
