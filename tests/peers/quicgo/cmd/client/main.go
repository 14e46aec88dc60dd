// Command client fetches objects over HTTP/3 with quic-go's http3.Transport behind a plain
// net/http Client, every quic-go setting at its default (the quic.Config only names qlog's
// tracer, which writes nothing unless QLOGDIR is set, as in quic-go's own example client). All
// requests go over the one connection the transport keeps for the host. After one HEAD request
// that sets the connection up (not counted), request i is issued at start + i/rate on its own
// goroutine, without waiting for the ones before it, so requests overlap when a response is
// slow. Each object is written as one JSON line when it completes or fails: its path, when it
// was issued and completed (seconds since the first scheduled request), the body bytes read, the
// HTTP status and the error, if any. The peer of tests/interop/objects_bench.py.
//
// With -live PATH it instead plays one streamed response of recoup's live frames (live.go),
// after the same HEAD request on -warmup: a JSON line per frame as its last byte arrives, and
// one at the end. The peer of tests/interop/recovery_bench.py.
//
//	client -insecure -url https://127.0.0.1:4434 -count 300 -rate 10 -pattern /obj-%04d.bin
//	client -insecure -url https://127.0.0.1:4434 -warmup /index.html -live '/live/cam?fps=30'
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"

	"recoup/tests/peers/quicgo/internal/version"
)

type result struct {
	Path   string  `json:"path"`
	Issue  float64 `json:"issue_s"`
	Done   float64 `json:"done_s"`
	Bytes  int64   `json:"bytes"`
	Status int     `json:"status"`
	Error  string  `json:"error"`
}

func main() {
	base := flag.String("url", "https://127.0.0.1:4433", "scheme, host and port of the server")
	pattern := flag.String("pattern", "/obj-%04d.bin", "path of object i (fmt verb for i)")
	count := flag.Int("count", 300, "objects to fetch")
	rate := flag.Float64("rate", 10, "objects issued per second")
	timeout := flag.Duration("timeout", 30*time.Second, "give up on an object this long after its issue")
	insecure := flag.Bool("insecure", false, "skip certificate checks (self-signed servers)")
	out := flag.String("out", "-", "JSON lines file (- for stdout)")
	live := flag.String("live", "", "play this live stream path instead of fetching objects")
	warmup := flag.String("warmup", "", "path of the HEAD request that sets the connection up (default: object 0)")
	showVersion := flag.Bool("version", false, "print the quic-go version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.String())
		return
	}

	w := os.Stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		w = f
	}
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: *insecure},
		QUICConfig:      &quic.Config{Tracer: qlog.DefaultConnectionTracer},
	}
	defer tr.Close() // closes the connection: its qlog trace is flushed
	client := &http.Client{Transport: tr}

	// Set the connection up before the clock starts, so the first object's time is not the
	// handshake's.
	first := *warmup
	if first == "" {
		first = fmt.Sprintf(*pattern, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, *base+first, nil)
	if rsp, err := client.Do(req); err != nil {
		log.Printf("warm-up HEAD failed: %v", err)
	} else {
		rsp.Body.Close()
	}
	cancel()

	enc := json.NewEncoder(w)
	if *live != "" {
		playLive(client, *base+*live, *timeout, enc)
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Duration(float64(time.Second) / *rate)
	for i := range *count {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		path := fmt.Sprintf(*pattern, i)
		wg.Go(func() {
			issued := time.Now()
			r := result{Path: path, Issue: issued.Sub(start).Seconds()}
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, *base+path, nil)
			rsp, err := client.Do(req)
			if err == nil {
				r.Status = rsp.StatusCode
				r.Bytes, err = io.Copy(io.Discard, rsp.Body)
				rsp.Body.Close()
				if err == nil && rsp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", rsp.StatusCode)
				}
			}
			r.Done = time.Since(start).Seconds()
			if err != nil {
				r.Error = err.Error()
			}
			mu.Lock()
			enc.Encode(r)
			mu.Unlock()
		})
	}
	wg.Wait()
}
