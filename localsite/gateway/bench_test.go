package main

// What the gateway adds to a request: the same small completion request sent to a fake upstream directly, and
// through the gateway with the fake EPP (TLS, in-process, answering at once), one client and 16 at a time.
// Everything shares the machine's CPUs, so this is the stand-in's cost plus the ext_proc round trips, not the
// real EPP's scheduling.
//
//	go test -run '^$' -bench . -benchtime 3s

import (
	"io"
	"log"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const benchBody = `{"model":"MiniMaxAI/MiniMax-M2.7","prompt":"Write a function that reverses a linked list.","max_tokens":16}`

func BenchmarkDirect(b *testing.B) {
	dest, _ := startUpstream(b, "a")
	benchmark(b, "http://"+dest+"/v1/completions")
}

func BenchmarkGateway(b *testing.B) {
	dest, _ := startUpstream(b, "a")
	epp := &fakeEPP{decide: func(map[string]string, []byte) decision {
		return decision{destination: dest, set: map[string]string{prefillHeader: dest}}
	}}
	gw := startGateway(b, config{epp: startEPP(b, epp, true)})
	benchmark(b, gw+"/v1/completions")
}

func benchmark(b *testing.B, url string) {
	log.SetOutput(io.Discard) // the per-request log line, thousands of times
	defer log.SetOutput(os.Stderr)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	for _, clients := range []int{1, 16} {
		b.Run(map[int]string{1: "clients=1", 16: "clients=16"}[clients], func(b *testing.B) {
			var mu sync.Mutex
			var latencies []time.Duration
			one := func() {
				start := time.Now()
				resp, err := client.Post(url, "application/json", strings.NewReader(benchBody))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
				}
				d := time.Since(start)
				mu.Lock()
				latencies = append(latencies, d)
				mu.Unlock()
			}
			b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			if clients == 1 {
				for b.Loop() {
					one()
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						one()
					}
				})
			}
			b.StopTimer()
			slices.Sort(latencies)
			if n := len(latencies); n > 0 {
				b.ReportMetric(float64(latencies[n/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(latencies[min(n-1, n*99/100)].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
