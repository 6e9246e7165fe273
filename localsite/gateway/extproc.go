package main

// One ext_proc stream per client request, as Envoy's ext_proc filter opens it with the processing mode of
// upstream's Envoy configuration for the EPP: request and response headers SEND, request and response bodies
// FULL_DUPLEX_STREAMED, trailers not sent (HTTP/1.1 clients send none).
//
// What the EPP (gateway-api-inference-extension v1.4.0 pkg/epp/handlers, which llm-d's EPP v0.7.1 runs)
// answers, phase by phase, and what is done with it here:
//   - request headers + body: nothing until the body's end_of_stream; then one RequestHeaders response
//     (header_mutation.set_headers: x-gateway-destination-endpoint, content-length, the P/D header
//     x-prefiller-host-port, the client's headers echoed; clear_route_cache; dynamic_metadata envoy.lb ->
//     x-gateway-destination-endpoint) and RequestBody responses whose streamed_response carry the whole
//     (possibly rewritten) body, the last with end_of_stream. A request without a body (headers end_of_stream):
//     the headers response only, with a random endpoint. Or an ImmediateResponse (400, 404, 429, 500, 503).
//   - response headers: a ResponseHeaders response setting the response's headers (plus x-went-into-resp-headers).
//   - response body: streamed_response chunks, one per chunk sent for text/event-stream responses, all at
//     end_of_stream for the others (so the body is sent from another goroutine than the one receiving). It is
//     sent right after the response headers, without waiting for their answer, as Envoy does in this mode.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	bodyChunk   = 64 << 10 // bytes per RequestBody/ResponseBody message
	lbNamespace = "envoy.lb"
	servedKey   = "x-gateway-destination-endpoint-served" // data plane -> EPP, in the response phase
)

type stream = extprocv3.ExternalProcessor_ProcessClient

// The response body's read buffers, reused: a new 64 KiB buffer per request was half of all allocation.
var bodyBuffers = sync.Pool{New: func() any { return new([bodyChunk]byte) }}

// route is the EPP's answer to the request phase.
type route struct {
	header      http.Header
	uri         string
	body        []byte
	destination string // the first endpoint of x-gateway-destination-endpoint
	immediate   *extprocv3.ImmediateResponse
}

func (g *gateway) serve(w http.ResponseWriter, r *http.Request, rec *record) {
	// The whole body is read first: the EPP answers nothing before the body's end, and FailOpen needs it again.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		fail(w, rec, http.StatusBadRequest, "reading the request body: %v", err)
		return
	}
	if len(body) > maxRequestBody {
		fail(w, rec, http.StatusRequestEntityTooLarge, "request body over %d bytes", maxRequestBody)
		return
	}
	// Cancelling ends the stream whatever happens; the EPP then runs its request-completion hooks.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	s, err := g.epp.Process(ctx)
	if err != nil {
		g.eppFailed(w, r, rec, body, err)
		return
	}
	rt, sent, err := requestPhase(s, r, body)
	if err != nil {
		g.eppFailed(w, r, rec, body, err)
		return
	}
	if rt.immediate != nil {
		writeImmediate(w, rec, rt.immediate)
		return
	}
	rec.destination, rec.prefill = rt.destination, rt.header.Get(prefillHeader)
	rec.picked = time.Since(rec.start)
	if rt.destination == "" {
		// Envoy's ORIGINAL_DST cluster without the header has no host: 503.
		fail(w, rec, http.StatusServiceUnavailable, "the EPP set no %s", destinationHeader)
		return
	}
	resp, err := g.forward(r, rt.destination, rt.uri, rt.header, rt.body)
	if err != nil {
		// As Envoy's local reply; the response phase is skipped and the cancelled stream ends the EPP's request.
		fail(w, rec, http.StatusServiceUnavailable, "upstream connect error to %s: %v", rt.destination, err)
		return
	}
	defer resp.Body.Close()
	rec.answered = time.Since(rec.start)
	<-sent // one sender at a time on a gRPC stream
	g.responsePhase(w, r, rec, s, cancel, resp, rt)
}

// requestPhase sends the request's headers and body and reads the EPP's decision. The sends run in their own
// goroutine (a processor may answer, e.g. with an ImmediateResponse, before reading everything); `sent` closes
// when they are done. A send error needs no handling: it ends the stream, and Recv reports why.
func requestPhase(s stream, r *http.Request, body []byte) (*route, <-chan struct{}, error) {
	header := r.Header.Clone()
	removeHopByHop(header)
	if header.Get("x-request-id") == "" { // Envoy's connection manager adds one; the EPP and sidecar log it
		header.Set("x-request-id", requestID())
	}
	rt := &route{header: header, uri: r.URL.RequestURI()}
	hs := []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte(r.Method)},
		{Key: ":path", RawValue: []byte(rt.uri)},
		{Key: ":authority", RawValue: []byte(r.Host)},
		{Key: ":scheme", RawValue: []byte("http")},
	}
	hs = append(hs, headerValues(header)...)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		first := &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
				Headers: &corev3.HeaderMap{Headers: hs}, EndOfStream: len(body) == 0}},
			ProtocolConfig: &extprocv3.ProtocolConfiguration{ // Envoy sends it once, on the first message
				RequestBodyMode:  filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
				ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
			},
		}
		if s.Send(first) != nil {
			return
		}
		for off := 0; off < len(body); off += bodyChunk {
			end := min(off+bodyChunk, len(body))
			if s.Send(bodyMessage(false, body[off:end], end == len(body))) != nil {
				return
			}
		}
	}()

	gotHeaders, bodyDone := false, len(body) == 0
	var newBody []byte
	for !gotHeaders || !bodyDone {
		m, err := s.Recv()
		if err != nil {
			return nil, sent, streamError(err)
		}
		switch v := m.Response.(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			rt.immediate = v.ImmediateResponse
			return rt, sent, nil
		case *extprocv3.ProcessingResponse_RequestHeaders:
			if gotHeaders {
				return nil, sent, errors.New("spurious message: a second request headers response")
			}
			gotHeaders = true
			applyHeaderMutation(rt.header, map[string]*string{":path": &rt.uri}, v.RequestHeaders.GetResponse().GetHeaderMutation())
			rt.destination = firstEndpoint(rt.header.Get(destinationHeader))
			if rt.destination == "" { // the protocol's other carrier: dynamic metadata envoy.lb
				lb := m.GetDynamicMetadata().GetFields()[lbNamespace].GetStructValue()
				rt.destination = firstEndpoint(lb.GetFields()[destinationHeader].GetStringValue())
			}
		case *extprocv3.ProcessingResponse_RequestBody:
			// In FULL_DUPLEX_STREAMED mode a body answer must be a streamed_response, after the headers answer.
			chunk := v.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if !gotHeaders || chunk == nil || bodyDone {
				return nil, sent, errors.New("spurious message: a request body response that is not the next streamed_response")
			}
			newBody = append(newBody, chunk.GetBody()...)
			bodyDone = chunk.GetEndOfStream()
		default:
			return nil, sent, fmt.Errorf("spurious message in the request phase: %T", v)
		}
	}
	rt.body = newBody
	return rt, sent, nil
}

// responsePhase sends the upstream's response through the EPP and writes what comes back to the client. A
// failure before the client has its headers is the pool's failureMode (FailOpen: the response passes
// unprocessed); after, the client's connection is aborted (as Envoy resets a stream whose processor failed).
func (g *gateway) responsePhase(w http.ResponseWriter, r *http.Request, rec *record, s stream, cancel context.CancelFunc,
	resp *http.Response, rt *route) {
	noBody := resp.ContentLength == 0 || r.Method == http.MethodHead
	hs := append([]*corev3.HeaderValue{{Key: ":status", RawValue: []byte(strconv.Itoa(resp.StatusCode))}}, headerValues(resp.Header)...)
	served, _ := structpb.NewStruct(map[string]any{servedKey: rt.destination})
	err := s.Send(&extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: hs}, EndOfStream: noBody}},
		MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{lbNamespace: served}},
	})
	// In FULL_DUPLEX_STREAMED mode Envoy sends the body without waiting for the headers' answer: so does this,
	// from another goroutine (the EPP answers streamed responses chunk by chunk but buffered ones only at their
	// end). It keeps what it read until the headers' answer is in, for FailOpen to pass it on unprocessed.
	var body *responseBody
	if err == nil && !noBody {
		body = sendBody(s, resp, rec, cancel)
	}
	var m *extprocv3.ProcessingResponse
	if err == nil {
		m, err = s.Recv()
	}
	out := resp.Header.Clone()
	removeHopByHop(out)
	if err == nil {
		switch v := m.Response.(type) {
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			writeImmediate(w, rec, v.ImmediateResponse)
			return
		case *extprocv3.ProcessingResponse_ResponseHeaders:
			status := strconv.Itoa(resp.StatusCode)
			applyHeaderMutation(out, map[string]*string{":status": &status}, v.ResponseHeaders.GetResponse().GetHeaderMutation())
			if code, cerr := strconv.Atoi(status); cerr == nil && code >= 100 && code <= 599 {
				resp.StatusCode = code
			}
		default:
			err = fmt.Errorf("spurious message, expected the response headers answer: %T", v)
		}
	}
	if err != nil {
		err = streamError(err)
		if !g.failOpen {
			fail(w, rec, g.statusOnError, "the EPP failed in the response phase: %v", err)
			return
		}
		rec.note = fmt.Sprintf("FailOpen: the EPP failed in the response phase: %v", err)
		copyHeader(w.Header(), out)
		setOwnHeaders(w.Header(), rt)
		rec.status = resp.StatusCode
		w.WriteHeader(resp.StatusCode)
		if body != nil { // what the body's goroutine read before the stream ended, then the rest
			cancel()
			if _, werr := w.Write(body.abandon()); werr != nil {
				return
			}
		}
		copyBody(w, resp.Body)
		return
	}
	if body != nil {
		body.release() // the EPP has the response: nothing more to keep for FailOpen
	}
	// The body may change length: Content-Length is dropped (as Envoy does in this mode) and set again below
	// when the response is written whole.
	out.Del("content-length")
	copyHeader(w.Header(), out)
	setOwnHeaders(w.Header(), rt)
	rec.status = resp.StatusCode
	if noBody {
		w.WriteHeader(resp.StatusCode)
		_ = s.CloseSend()
		return
	}

	// A streamed upstream response (no Content-Length: SSE) is written and flushed chunk by chunk; a sized one
	// is written whole once the EPP has answered its end, with its new Content-Length.
	streaming := resp.ContentLength < 0
	flusher, _ := w.(http.Flusher)
	var whole []byte
	if streaming {
		w.WriteHeader(resp.StatusCode)
		if flusher != nil {
			flusher.Flush()
		}
	}
	for {
		m, err := s.Recv()
		var chunk *extprocv3.StreamedBodyResponse
		if err == nil {
			if v, ok := m.Response.(*extprocv3.ProcessingResponse_ResponseBody); ok {
				chunk = v.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			}
			if chunk == nil {
				err = fmt.Errorf("spurious message, expected a response body streamed_response: %T", m.Response)
			}
		}
		if err != nil {
			cancel()
			select {
			case uerr := <-body.upstreamErr:
				err = fmt.Errorf("the upstream's body failed: %w", uerr)
			default:
			}
			if !streaming && !g.failOpen { // nothing written yet: the upstream's headers give way to the error
				clear(w.Header())
				fail(w, rec, g.statusOnError, "the EPP failed in the response phase: %v", streamError(err))
				return
			}
			rec.note = fmt.Sprintf("the EPP failed mid-response, aborted: %v", streamError(err))
			panic(http.ErrAbortHandler)
		}
		if streaming {
			if _, werr := w.Write(chunk.GetBody()); werr != nil {
				return // the client went away; the deferred cancel ends the stream
			}
			if flusher != nil {
				flusher.Flush()
			}
		} else {
			whole = append(whole, chunk.GetBody()...)
		}
		if chunk.GetEndOfStream() {
			break
		}
	}
	if !streaming {
		w.Header().Set("content-length", strconv.Itoa(len(whole)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(whole)
	}
}

// responseBody is the goroutine that reads the upstream's body and sends it to the EPP in ResponseBody messages.
type responseBody struct {
	upstreamErr chan error    // the upstream body's read error, if any
	done        chan struct{} // closed when the goroutine has returned
	mu          sync.Mutex
	keeping     bool   // until stop: a copy of each chunk read goes to kept
	kept        []byte // what was read while keeping
}

// release ends the keeping: the EPP answered the response headers, the body is its.
func (b *responseBody) release() {
	b.mu.Lock()
	b.keeping, b.kept = false, nil
	b.mu.Unlock()
}

// abandon waits for the goroutine to return (the stream was cancelled: its next Send fails) and returns what it
// read, so the caller can pass that on and then read the rest of the body itself.
func (b *responseBody) abandon() []byte {
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kept
}

func sendBody(s stream, resp *http.Response, rec *record, cancel context.CancelFunc) *responseBody {
	b := &responseBody{upstreamErr: make(chan error, 1), done: make(chan struct{}), keeping: true}
	go func() {
		defer close(b.done)
		buf := bodyBuffers.Get().(*[bodyChunk]byte)
		defer bodyBuffers.Put(buf)
		total := int64(0)
		for {
			n, rerr := resp.Body.Read(buf[:])
			total += int64(n)
			last := rerr == io.EOF || (resp.ContentLength > 0 && total == resp.ContentLength)
			if rerr != nil && rerr != io.EOF {
				b.upstreamErr <- rerr
				cancel() // the EPP's Recv and ours fail: the client's response is aborted
				return
			}
			b.mu.Lock()
			if b.keeping {
				b.kept = append(b.kept, buf[:n]...)
			}
			b.mu.Unlock()
			if n > 0 || last { // Send has encoded the message when it returns: buf can be reused
				if s.Send(bodyMessage(true, buf[:n], last)) != nil {
					return
				}
			}
			if last {
				rec.bodyRead.Store(int64(time.Since(rec.start)))
				_ = s.CloseSend()
				return
			}
		}
	}()
	return b
}

// writeImmediate passes the EPP's ImmediateResponse to the client as it is (e.g. 503 no pods, 429 shed).
func writeImmediate(w http.ResponseWriter, rec *record, ir *extprocv3.ImmediateResponse) {
	status := int(ir.GetStatus().GetCode())
	if status < 200 || status > 599 {
		status = http.StatusInternalServerError // Envoy refuses a missing or invalid status
	}
	applyHeaderMutation(w.Header(), nil, ir.GetHeaders())
	if len(ir.GetBody()) > 0 && w.Header().Get("content-type") == "" {
		w.Header().Set("content-type", "text/plain") // Envoy's local reply
	}
	rec.status, rec.note = status, "immediate response from the EPP"
	if ir.GetDetails() != "" {
		rec.note += ": " + ir.GetDetails()
	}
	w.WriteHeader(status)
	_, _ = w.Write(ir.GetBody())
}

// applyHeaderMutation applies set/remove as Envoy's default HeaderMutationRules do: host, :authority, :scheme,
// :method and x-envoy-* are not changed, ':' headers and host never removed. The pseudo-headers named in
// `pseudo` (:path of a request, :status of a response) are set through it. A set replaces (the `append` field
// defaults to false in ext_proc), unless `append` is true or the action is ADD_IF_ABSENT.
func applyHeaderMutation(h http.Header, pseudo map[string]*string, m *extprocv3.HeaderMutation) {
	for _, o := range m.GetSetHeaders() {
		key, value := strings.ToLower(o.GetHeader().GetKey()), headerValue(o.GetHeader())
		if p, ok := pseudo[key]; ok {
			*p = value
			continue
		}
		if key == "host" || strings.HasPrefix(key, ":") || strings.HasPrefix(key, "x-envoy-") {
			continue
		}
		switch {
		case o.GetAppend().GetValue():
			h.Add(key, value)
		case o.GetAppendAction() == corev3.HeaderValueOption_ADD_IF_ABSENT:
			if len(h.Values(key)) == 0 {
				h.Set(key, value)
			}
		default:
			h.Set(key, value)
		}
	}
	for _, key := range m.GetRemoveHeaders() {
		key = strings.ToLower(key)
		if key != "host" && !strings.HasPrefix(key, ":") && !strings.HasPrefix(key, "x-envoy-") {
			h.Del(key)
		}
	}
}

// headerValue reads raw_value, else value (as the EPP does).
func headerValue(v *corev3.HeaderValue) string {
	if len(v.GetRawValue()) > 0 {
		return string(v.GetRawValue())
	}
	return v.GetValue()
}

// headerValues: one HeaderValue per value, lower-case names, raw_value (Envoy's encoding).
func headerValues(h http.Header) []*corev3.HeaderValue {
	var out []*corev3.HeaderValue
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)})
		}
	}
	return out
}

func bodyMessage(response bool, body []byte, last bool) *extprocv3.ProcessingRequest {
	b := &extprocv3.HttpBody{Body: body, EndOfStream: last}
	if response {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: b}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: b}}
}

// firstEndpoint: the EPP may list fallbacks ("ip:port,ip:port"); without retries the first is the one used.
func firstEndpoint(list string) string {
	first, _, _ := strings.Cut(list, ",")
	return strings.TrimSpace(first)
}

func setOwnHeaders(h http.Header, rt *route) {
	h.Set(destinationHeader, rt.destination)
	if p := rt.header.Get(prefillHeader); p != "" {
		h.Set(usedPrefillHeader, p)
	}
}

func streamError(err error) error {
	if err == io.EOF {
		return errors.New("the EPP closed the stream without answering")
	}
	return err
}

func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
