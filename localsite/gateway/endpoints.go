package main

import (
	"bytes"
	"context"
	"log"
	"os"
	"strings"
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
	ticker := time.NewTicker(endpointsPoll)
	defer ticker.Stop()
	for {
		e.read(path)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (e *eppEndpoints) read(path string) {
	content, err := os.ReadFile(path)
	if err != nil {
		content = nil // no file yet: no endpoint
	}
	if e.last != nil && bytes.Equal(content, e.last) {
		return
	}
	e.last = append([]byte{}, content...)
	addresses := parseEndpoints(string(content))
	state := resolver.State{}
	for _, a := range addresses {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	log.Printf("gateway: EPP endpoints %v", addresses)
	e.resolver.UpdateState(state)
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
