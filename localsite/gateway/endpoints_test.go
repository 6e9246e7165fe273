package main

// --epp-endpoints-file: the EPP Service's ready endpoints, as the site writes them while EPP pods come and go.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseEndpoints(t *testing.T) {
	got := parseEndpoints("# the EPP Service\n127.1.0.4:9002\n\n  127.1.0.9:9002 \n")
	if want := []string{"127.1.0.4:9002", "127.1.0.9:9002"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := parseEndpoints(""); len(got) != 0 {
		t.Errorf("an empty file: %v", got)
	}
}

func writeEndpoints(t *testing.T, path string, endpoints ...string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(endpoints, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// An EPP that leaves the list gets no new stream, and the stream it holds finishes (the connection drains, as
// Envoy's ext_proc cluster drains a host EDS removed); no endpoint at all: the pool's failure mode at once.
func TestEndpointsFileMovesNewStreamsAndLetsTheOldFinish(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		fmt.Fprint(w, "done")
	}))
	defer slow.Close()
	dest := slow.Listener.Addr().String()
	decide := func(map[string]string, []byte) decision { return decision{destination: dest} }
	first, second := &fakeEPP{decide: decide}, &fakeEPP{decide: decide}
	a, b := startEPP(t, first, false), startEPP(t, second, false)
	file := filepath.Join(t.TempDir(), "epp-endpoints")
	writeEndpoints(t, file, a)
	gw := startGateway(t, config{eppFile: file, eppPlaintext: true})
	if resp, body := post(t, gw+"/fast", `{}`, nil); resp.StatusCode != 200 || len(first.headers) != 1 {
		t.Fatalf("through the first EPP: %d %s (streams %d)", resp.StatusCode, body, len(first.headers))
	}
	answered := postInBackground(gw + "/slow")
	time.Sleep(300 * time.Millisecond) // the slow request's stream is open on the first EPP
	writeEndpoints(t, file, b)
	time.Sleep(5 * endpointsPoll)
	for i := 0; i < 3; i++ {
		if resp, body := post(t, gw+"/fast", `{}`, nil); resp.StatusCode != 200 {
			t.Fatalf("after the move: %d %s", resp.StatusCode, body)
		}
	}
	if n := len(second.headers); n != 3 {
		t.Errorf("the second EPP got %d streams, want the 3 sent after the move", n)
	}
	close(release)
	if got := <-answered; got != "200 done" {
		t.Errorf("the request in flight on the first EPP got %q", got)
	}
	writeEndpoints(t, file)
	time.Sleep(5 * endpointsPoll)
	if resp, _ := post(t, gw+"/fast", `{}`, nil); resp.StatusCode != 500 {
		t.Errorf("no EPP endpoint: %d, want FailClose's 500", resp.StatusCode)
	}
}

// --fallback-endpoints-file: with FailOpen and no EPP, requests go round robin to the pool's ready endpoints as
// the site lists them; a pod that leaves the list gets none, and an empty list answers 503 (no healthy upstream).
func TestFallbackEndpointsFileFollowsThePool(t *testing.T) {
	a, _ := startUpstream(t, "a")
	b, _ := startUpstream(t, "b")
	file := filepath.Join(t.TempDir(), "pool-endpoints")
	writeEndpoints(t, file, a, b)
	gw := startGateway(t, config{epp: closedPort(t), failOpen: true, fallbackFile: file})
	served := func(n int) map[string]int {
		seen := map[string]int{}
		for i := 0; i < n; i++ {
			resp, body := post(t, gw+"/v1/completions", `{}`, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("FailOpen: %d %s", resp.StatusCode, body)
			}
			seen[resp.Header.Get("x-inference-pod")]++
		}
		return seen
	}
	if got := served(4); got["a"] != 2 || got["b"] != 2 {
		t.Errorf("both pods listed: %v, want 2 each", got)
	}
	writeEndpoints(t, file, b)
	time.Sleep(5 * endpointsPoll)
	if got := served(3); got["b"] != 3 {
		t.Errorf("a left the list: %v, want all on b", got)
	}
	writeEndpoints(t, file)
	time.Sleep(5 * endpointsPoll)
	if resp, body := post(t, gw+"/v1/completions", `{}`, nil); resp.StatusCode != 503 || !strings.Contains(body, "no ready endpoint") {
		t.Errorf("no endpoint listed: %d %q, want 503", resp.StatusCode, body)
	}
}
