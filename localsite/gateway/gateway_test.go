package main

// The gateway against an in-process fake EPP that answers as the EPP's handlers do (fakeEPP: everything after
// the body's end, chunked streamed_response bodies, response bodies chunk by chunk for SSE and at the end
// otherwise) and fake upstreams (httptest, 127.0.0.1 only).

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// decision is what the fake EPP answers for one request.
type decision struct {
	destination  string            // x-gateway-destination-endpoint (may be a list)
	metadataOnly bool              // carry it in dynamic metadata only
	set          map[string]string // more request headers to set
	body         []byte            // the rewritten body (nil: unchanged)
	immediate    *extprocv3.ImmediateResponse
	failOnBody   bool // break the stream instead of answering
}

type fakeEPP struct {
	extprocv3.UnimplementedExternalProcessorServer
	decide        func(headers map[string]string, body []byte) decision
	breakResponse bool // break the stream at the response headers
	headersLast   bool // answer the response headers only once the response body's end is in (full duplex)

	mu      sync.Mutex
	headers []map[string]string // the request headers of each stream
	served  []string            // x-gateway-destination-endpoint-served of each response
}

func (f *fakeEPP) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	headers, body, streaming := map[string]string{}, []byte(nil), false
	var heldHeaders *extprocv3.ProcessingResponse // the response headers' answer, when headersLast
	for {
		req, err := srv.Recv()
		if err == io.EOF || status.Code(err) == codes.Canceled {
			return nil
		}
		if err != nil {
			return err
		}
		var out []*extprocv3.ProcessingResponse
		switch v := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			for _, h := range v.RequestHeaders.GetHeaders().GetHeaders() {
				headers[h.Key] = string(h.RawValue)
			}
			f.mu.Lock()
			f.headers = append(f.headers, headers)
			f.mu.Unlock()
			if v.RequestHeaders.EndOfStream {
				out = f.answer(headers, nil)
			}
		case *extprocv3.ProcessingRequest_RequestBody:
			body = append(body, v.RequestBody.Body...)
			if v.RequestBody.EndOfStream {
				out = f.answer(headers, body)
				if out == nil {
					return status.Error(codes.Internal, "fake EPP: broken on purpose")
				}
			}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			if f.breakResponse {
				return status.Error(codes.Internal, "fake EPP: broken on purpose")
			}
			lb := req.GetMetadataContext().GetFilterMetadata()["envoy.lb"]
			f.mu.Lock()
			f.served = append(f.served, lb.GetFields()[servedKey].GetStringValue())
			f.mu.Unlock()
			set := []*corev3.HeaderValueOption{setHeader("x-went-into-resp-headers", "true")}
			for _, h := range v.ResponseHeaders.GetHeaders().GetHeaders() {
				streaming = streaming || (h.Key == "content-type" && strings.Contains(string(h.RawValue), "text/event-stream"))
			}
			heldHeaders = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
				ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
					HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set}}}}}
			if !f.headersLast {
				out, heldHeaders = []*extprocv3.ProcessingResponse{heldHeaders}, nil
			}
			body = nil
		case *extprocv3.ProcessingRequest_ResponseBody:
			if streaming { // as the EPP: pass each chunk on at once
				out = bodyResponses(true, v.ResponseBody.Body, v.ResponseBody.EndOfStream)
			} else if body = append(body, v.ResponseBody.Body...); v.ResponseBody.EndOfStream {
				out = bodyResponses(true, body, true)
			}
			if heldHeaders != nil && v.ResponseBody.EndOfStream {
				out = append([]*extprocv3.ProcessingResponse{heldHeaders}, out...)
			}
		}
		for _, m := range out {
			if err := srv.Send(m); err != nil {
				return err
			}
		}
		if len(out) == 1 && out[0].GetImmediateResponse() != nil {
			return nil
		}
	}
}

// answer: the request phase's responses (nil: break the stream).
func (f *fakeEPP) answer(headers map[string]string, body []byte) []*extprocv3.ProcessingResponse {
	d := f.decide(headers, body)
	if d.failOnBody {
		return nil
	}
	if d.immediate != nil {
		return []*extprocv3.ProcessingResponse{{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: d.immediate}}}
	}
	if d.body != nil {
		body = d.body
	}
	var set []*corev3.HeaderValueOption
	if !d.metadataOnly {
		set = append(set, setHeader(destinationHeader, d.destination))
	}
	if body != nil {
		set = append(set, setHeader("Content-Length", fmt.Sprint(len(body))))
	}
	for k, v := range headers { // the EPP echoes the request's headers (pseudo-headers included), not content-length
		if k != "content-length" {
			set = append(set, setHeader(k, v))
		}
	}
	for k, v := range d.set {
		set = append(set, setHeader(k, v))
	}
	md, _ := structpb.NewStruct(map[string]any{"envoy.lb": map[string]any{destinationHeader: d.destination}})
	out := []*extprocv3.ProcessingResponse{{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set}}}},
		DynamicMetadata: md,
	}}
	if body != nil {
		out = append(out, bodyResponses(false, body, true)...)
	}
	return out
}

// bodyResponses splits a body in two streamed_response chunks (the gateway must join them).
func bodyResponses(response bool, body []byte, eos bool) []*extprocv3.ProcessingResponse {
	half := len(body) / 2
	var out []*extprocv3.ProcessingResponse
	for i, part := range [][]byte{body[:half], body[half:]} {
		common := &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
			StreamedResponse: &extprocv3.StreamedBodyResponse{Body: part, EndOfStream: eos && i == 1}}}}
		if response {
			out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: common}}})
		} else {
			out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: common}}})
		}
	}
	return out
}

func setHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
}

// selfSignedNoSAN: a certificate like the EPP's own (CN only, no subject alternative name).
func selfSignedNoSAN(t testing.TB) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "epp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func startEPP(t testing.TB, f *fakeEPP, withTLS bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if withTLS {
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(ptr(selfSignedNoSAN(t)))))
	}
	srv := grpc.NewServer(opts...)
	extprocv3.RegisterExternalProcessorServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func ptr[T any](v T) *T { return &v }

// upstream: a fake model server that answers with what it received.
type seen struct {
	Path          string      `json:"path"`
	Header        http.Header `json:"header"`
	Body          string      `json:"body"`
	ContentLength int64       `json:"content_length"`
	Host          string      `json:"host"`
}

func startUpstream(t testing.TB, name string) (string, *httptest.Server) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("content-type", "application/json")
		w.Header().Set("x-inference-pod", name)
		_ = json.NewEncoder(w).Encode(seen{r.URL.RequestURI(), r.Header, string(body), r.ContentLength, r.Host})
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), srv
}

func startGateway(t testing.TB, c config) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, c, ln)
}

func serveOn(t testing.TB, c config, ln net.Listener) string {
	if c.statusOnError == 0 {
		c.statusOnError = http.StatusInternalServerError
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, c, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}

func post(t testing.TB, url, body string, header map[string]string) (*http.Response, string) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// postInBackground posts `{}` to url from a goroutine; the channel gets "<status> <body>", or the error.
func postInBackground(url string) <-chan string {
	answered := make(chan string, 1)
	go func() {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
		if err != nil {
			answered <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- fmt.Sprint(resp.StatusCode, " ", string(body))
	}()
	return answered
}

func TestTheEPPChoosesDestinationHeadersAndBody(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "TLS without SAN"}[withTLS], func(t *testing.T) {
			a, _ := startUpstream(t, "a")
			b, _ := startUpstream(t, "b")
			epp := &fakeEPP{decide: func(h map[string]string, body []byte) decision {
				return decision{destination: b + "," + a, set: map[string]string{prefillHeader: a},
					body: []byte(strings.Replace(string(body), `"m"`, `"m-rewritten"`, 1))}
			}}
			gw := startGateway(t, config{epp: startEPP(t, epp, withTLS), eppPlaintext: !withTLS})
			resp, body := post(t, gw+"/v1/completions?x=1", `{"model":"m","prompt":"hi"}`, map[string]string{"x-client": "c1"})
			if resp.StatusCode != 200 || resp.Header.Get("x-inference-pod") != "b" {
				t.Fatalf("want 200 from b (the first of the EPP's list), got %d %q: %s", resp.StatusCode, resp.Header.Get("x-inference-pod"), body)
			}
			var got seen
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			want := `{"model":"m-rewritten","prompt":"hi"}`
			if got.Body != want || got.ContentLength != int64(len(want)) {
				t.Errorf("upstream got body %q (length %d), want the EPP's %q", got.Body, got.ContentLength, want)
			}
			if got.Header.Get(prefillHeader) != a || got.Header.Get("x-client") != "c1" || got.Header.Get(destinationHeader) != b+","+a {
				t.Errorf("upstream headers: %v", got.Header)
			}
			if got.Path != "/v1/completions?x=1" || !strings.HasPrefix(got.Host, "127.0.0.1:") {
				t.Errorf("upstream path %q host %q", got.Path, got.Host)
			}
			if resp.Header.Get(destinationHeader) != b || resp.Header.Get(usedPrefillHeader) != a {
				t.Errorf("the stand-in's headers: %q %q", resp.Header.Get(destinationHeader), resp.Header.Get(usedPrefillHeader))
			}
			if resp.Header.Get("x-went-into-resp-headers") != "true" {
				t.Errorf("the EPP's response header mutation was not applied: %v", resp.Header)
			}
			if resp.ContentLength != int64(len(body)) {
				t.Errorf("response Content-Length %d for %d bytes", resp.ContentLength, len(body))
			}
			epp.mu.Lock()
			defer epp.mu.Unlock()
			h := epp.headers[0]
			if h[":method"] != "POST" || h[":path"] != "/v1/completions?x=1" || h[":scheme"] != "http" || h[":authority"] == "" ||
				h["content-type"] != "application/json" || h["x-client"] != "c1" || len(h["x-request-id"]) != 32 {
				t.Errorf("the EPP saw the request headers %v", h)
			}
			if epp.served[0] != b {
				t.Errorf("x-gateway-destination-endpoint-served %q, want %q", epp.served[0], b)
			}
		})
	}
}

func TestDestinationFromDynamicMetadata(t *testing.T) {
	a, _ := startUpstream(t, "a")
	epp := &fakeEPP{decide: func(map[string]string, []byte) decision { return decision{destination: a, metadataOnly: true} }}
	gw := startGateway(t, config{epp: startEPP(t, epp, false), eppPlaintext: true})
	resp, body := post(t, gw+"/v1/chat/completions", `{"model":"m"}`, nil)
	if resp.StatusCode != 200 || resp.Header.Get("x-inference-pod") != "a" || resp.Header.Get(usedPrefillHeader) != "" {
		t.Fatalf("got %d %v: %s", resp.StatusCode, resp.Header, body)
	}
}

func TestRequestWithoutBody(t *testing.T) {
	a, _ := startUpstream(t, "a")
	epp := &fakeEPP{decide: func(_ map[string]string, body []byte) decision {
		if body != nil {
			t.Errorf("a GET's body reached the EPP: %q", body)
		}
		return decision{destination: a}
	}}
	gw := startGateway(t, config{epp: startEPP(t, epp, false), eppPlaintext: true})
	resp, err := http.Get(gw + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("x-inference-pod") != "a" {
		t.Fatalf("got %d %v", resp.StatusCode, resp.Header)
	}
}

func TestStreamingPassesThroughChunkByChunk(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select { // the second event only once the client has read the first: no buffering on the way
		case <-next:
		case <-time.After(5 * time.Second):
			return
		}
		fmt.Fprint(w, "data: {\"n\":2}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	dest := srv.Listener.Addr().String()
	epp := &fakeEPP{decide: func(map[string]string, []byte) decision { return decision{destination: dest} }}
	gw := startGateway(t, config{epp: startEPP(t, epp, true)})
	req, _ := http.NewRequest(http.MethodPost, gw+"/v1/completions", strings.NewReader(`{"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("x-went-into-resp-headers") != "true" || resp.Header.Get(destinationHeader) != dest {
		t.Errorf("headers %v", resp.Header)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				lines <- sc.Text()
			}
		}
		close(lines)
	}()
	for i, want := range []string{`data: {"n":1}`, `data: {"n":2}`, `data: [DONE]`} {
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("event %d: %q, want %q", i, got, want)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("event %d did not arrive: the stream is buffered", i)
		}
		if i == 0 {
			close(next)
		}
	}
}

func TestImmediateResponsePassesThrough(t *testing.T) {
	for _, code := range []typev3.StatusCode{typev3.StatusCode_ServiceUnavailable, typev3.StatusCode_TooManyRequests} {
		epp := &fakeEPP{decide: func(map[string]string, []byte) decision {
			return decision{immediate: &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: code}, Body: []byte("no pods"),
				Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("x-why", "test")}}}}
		}}
		gw := startGateway(t, config{epp: startEPP(t, epp, false), eppPlaintext: true})
		resp, body := post(t, gw+"/v1/completions", `{"model":"m"}`, nil)
		if resp.StatusCode != int(code) || body != "no pods" || resp.Header.Get("x-why") != "test" ||
			resp.Header.Get("content-type") != "text/plain" || resp.Header.Get(destinationHeader) != "" {
			t.Errorf("got %d %q %v, want %d %q", resp.StatusCode, body, resp.Header, code, "no pods")
		}
	}
}

func closedPort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestEPPFailure(t *testing.T) {
	a, _ := startUpstream(t, "a")
	broken := &fakeEPP{decide: func(map[string]string, []byte) decision { return decision{failOnBody: true} }}
	brokenAddr := startEPP(t, broken, false)
	for _, tc := range []struct {
		name string
		c    config
		want int
	}{
		{"down, FailClose", config{epp: closedPort(t)}, 500},
		{"down, FailClose, status-on-error 503", config{epp: closedPort(t), statusOnError: 503}, 503},
		{"stream broken, FailClose", config{epp: brokenAddr, eppPlaintext: true}, 500},
		{"down, FailOpen", config{epp: closedPort(t), failOpen: true, fallbacks: []string{a}}, 200},
		{"stream broken, FailOpen", config{epp: brokenAddr, eppPlaintext: true, failOpen: true, fallbacks: []string{a}}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := startGateway(t, tc.c)
			resp, body := post(t, gw+"/v1/completions", `{"model":"m"}`, nil)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.want)
			}
			if tc.c.failOpen {
				var got seen
				_ = json.Unmarshal([]byte(body), &got)
				if resp.Header.Get(destinationHeader) != a || got.Body != `{"model":"m"}` {
					t.Errorf("FailOpen: dest %q, upstream got %q", resp.Header.Get(destinationHeader), got.Body)
				}
			} else if !strings.Contains(body, "the EPP failed") {
				t.Errorf("body %q does not say the EPP failed", body)
			}
		})
	}
}

func TestEPPFailureInTheResponsePhase(t *testing.T) {
	a, _ := startUpstream(t, "a")
	epp := &fakeEPP{breakResponse: true, decide: func(map[string]string, []byte) decision { return decision{destination: a} }}
	addr := startEPP(t, epp, false)
	closeGW := startGateway(t, config{epp: addr, eppPlaintext: true})
	if resp, body := post(t, closeGW+"/v1/completions", `{}`, nil); resp.StatusCode != 500 ||
		!strings.Contains(body, "the EPP failed in the response phase") || resp.Header.Get("x-inference-pod") != "" {
		t.Errorf("FailClose: got %d %v %q", resp.StatusCode, resp.Header, body)
	}
	openGW := startGateway(t, config{epp: addr, eppPlaintext: true, failOpen: true, fallbacks: []string{a}})
	if resp, body := post(t, openGW+"/v1/completions", `{}`, nil); resp.StatusCode != 200 ||
		resp.Header.Get("x-inference-pod") != "a" || resp.Header.Get("x-went-into-resp-headers") != "" {
		t.Errorf("FailOpen: the upstream's response should pass unprocessed, got %d %v %q", resp.StatusCode, resp.Header, body)
	}
}

// In FULL_DUPLEX_STREAMED mode Envoy sends the response body without waiting for the headers' answer: an EPP that
// answers the headers only at the body's end still gets an answer through (a gateway waiting first would hang).
func TestTheResponseBodyGoesWithoutWaitingForTheHeadersAnswer(t *testing.T) {
	a, _ := startUpstream(t, "a")
	epp := &fakeEPP{headersLast: true, decide: func(map[string]string, []byte) decision { return decision{destination: a} }}
	gw := startGateway(t, config{epp: startEPP(t, epp, false), eppPlaintext: true})
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post(gw+"/v1/completions", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatalf("the gateway waited for the headers' answer before sending the body: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("x-went-into-resp-headers") != "true" || !strings.Contains(string(body), `"body":"{\"model\":\"m\"}"`) {
		t.Errorf("got %d %v %q", resp.StatusCode, resp.Header, body)
	}
}

// FailOpen at the response headers passes the whole body on unprocessed, also the part the body's goroutine had
// already read and sent to the EPP (several 64 KiB messages' worth).
func TestFailOpenInTheResponsePhasePassesTheWholeBody(t *testing.T) {
	want := make([]byte, 5*bodyChunk+123)
	for i := range want {
		want[i] = byte('a' + i%26)
	}
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("content-length", strconv.Itoa(len(want)))
		_, _ = w.Write(want)
	}))
	t.Cleanup(big.Close)
	dest := big.Listener.Addr().String()
	epp := &fakeEPP{breakResponse: true, decide: func(map[string]string, []byte) decision { return decision{destination: dest} }}
	gw := startGateway(t, config{epp: startEPP(t, epp, false), eppPlaintext: true, failOpen: true, fallbacks: []string{dest}})
	for i := 0; i < 20; i++ { // the goroutine has read none, some or all of it by the time the stream breaks
		resp, body := post(t, gw+"/v1/completions", `{}`, nil)
		if resp.StatusCode != 200 || body != string(want) {
			t.Fatalf("try %d: got %d, %d bytes (want %d), equal %v", i, resp.StatusCode, len(body), len(want), body == string(want))
		}
	}
}

func TestServingResumesWhenTheEPPIsBack(t *testing.T) {
	a, _ := startUpstream(t, "a")
	epp := &fakeEPP{decide: func(map[string]string, []byte) decision { return decision{destination: a} }}
	serve := func(addr string) *grpc.Server {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		extprocv3.RegisterExternalProcessorServer(srv, epp)
		go func() { _ = srv.Serve(ln) }()
		return srv
	}
	addr := closedPort(t)
	first := serve(addr)
	gw := startGateway(t, config{epp: addr, eppPlaintext: true})
	if resp, _ := post(t, gw+"/v1/completions", `{}`, nil); resp.StatusCode != 200 {
		t.Fatalf("before the stop: %d", resp.StatusCode)
	}
	first.Stop()
	if resp, _ := post(t, gw+"/v1/completions", `{}`, nil); resp.StatusCode != 500 {
		t.Fatalf("EPP stopped: %d, want 500", resp.StatusCode)
	}
	time.Sleep(time.Second) // a while down: the connection is in backoff when the EPP comes back
	back := serve(addr)
	defer back.Stop()
	deadline := time.Now().Add(3 * time.Second)
	for {
		resp, body := post(t, gw+"/v1/completions", `{}`, nil)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the EPP is back but the gateway still answers %d %s", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestNoDestinationAndUpstreamDown(t *testing.T) {
	down := closedPort(t)
	for dest, want := range map[string]string{"": "set no x-gateway-destination-endpoint", down: "upstream connect error"} {
		epp := &fakeEPP{decide: func(map[string]string, []byte) decision { return decision{destination: dest} }}
		gw := startGateway(t, config{epp: startEPP(t, epp, false), eppPlaintext: true})
		resp, body := post(t, gw+"/v1/completions", `{}`, nil)
		if resp.StatusCode != 503 || !strings.Contains(body, want) {
			t.Errorf("destination %q: got %d %q, want 503 %q", dest, resp.StatusCode, body, want)
		}
	}
}

func TestListenFD(t *testing.T) {
	a, _ := startUpstream(t, "a")
	epp := &fakeEPP{decide: func(map[string]string, []byte) decision { return decision{destination: a} }}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File() // as a caller passes a socket made in another network namespace
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	fd, err := syscall.Dup(int(f.Fd())) // the gateway owns (and closes) its descriptor, as one it inherited
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	c := config{listenFD: fd, epp: startEPP(t, epp, false), eppPlaintext: true}
	inherited, err := listener(c)
	if err != nil {
		t.Fatal(err)
	}
	gw := serveOn(t, c, inherited)
	if resp, body := post(t, gw+"/v1/completions", `{}`, nil); resp.StatusCode != 200 {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

func TestGracefulStop(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		fmt.Fprint(w, "done")
	}))
	defer srv.Close()
	dest := srv.Listener.Addr().String()
	epp := &fakeEPP{decide: func(map[string]string, []byte) decision { return decision{destination: dest} }}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	c := config{epp: startEPP(t, epp, false), eppPlaintext: true, statusOnError: 500}
	go func() { stopped <- run(ctx, c, ln) }()
	answered := postInBackground("http://" + ln.Addr().String() + "/v1/completions")
	<-arrived // the request is in flight, at its upstream
	cancel()  // SIGTERM
	// The listener closes soon after the stop, not at a fixed instant (a busy machine delays the goroutine): dial until
	// refused, within a bound, while the request is still held.
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Error("still accepting connections 5 s after the stop")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	if got := <-answered; got != "200 done" {
		t.Errorf("the request in flight got %q", got)
	}
	if err := <-stopped; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--epp", "x:1"},
		{"--listen", "127.0.0.1:0", "--listen-fd", "3", "--epp", "x:1"},
		{"--listen", "127.0.0.1:0"},
		{"--listen", "127.0.0.1:0", "--epp", "x:1", "--failure-mode", "FailOpen"},
		{"--listen", "127.0.0.1:0", "--epp", "x:1", "--failure-mode", "Open"},
		{"--listen", "127.0.0.1:0", "--epp", "x:1", "--status-on-error", "42"},
		{"--listen", "127.0.0.1:0", "--epp", "x:1", "--epp-endpoints-file", "/tmp/x"},
		{"--listen", "127.0.0.1:0", "--epp", "x:1", "--failure-mode", "FailOpen", "--fallback-endpoints", "a:1", "--fallback-endpoints-file", "/tmp/x"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	c, err := parseFlags([]string{"--listen-fd", "3", "--epp", "x:1", "--failure-mode", "FailOpen", "--fallback-endpoints", "a:1, b:2"})
	if err != nil || !c.failOpen || len(c.fallbacks) != 2 || c.fallbacks[1] != "b:2" || c.statusOnError != 500 || c.eppPlaintext {
		t.Errorf("%+v %v", c, err)
	}
	c, err = parseFlags([]string{"--listen-fd", "3", "--epp", "x:1", "--failure-mode", "FailOpen", "--fallback-endpoints-file", "/run/pool"})
	if err != nil || !c.failOpen || c.fallbackFile != "/run/pool" || len(c.fallbacks) != 0 {
		t.Errorf("%+v %v", c, err)
	}
}
