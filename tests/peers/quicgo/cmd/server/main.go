// Command server serves the files under a directory over HTTP/3 with quic-go's http3 package
// and net/http's file server, as a new user would set it up: a self-signed certificate for
// localhost and 127.0.0.1 generated at start (or -cert and -key), and every quic-go setting at
// its default (the quic.Config only names qlog's tracer, which writes nothing unless QLOGDIR is
// set, as in quic-go's own example server). With -origin, paths under /live/ are relayed from that HTTP/1.1
// origin by net/http/httputil's ReverseProxy, flushing every write at once (FlushInterval -1),
// as a streaming edge is set up. It prints "listening on ADDR" once the UDP socket is bound and
// serves until SIGINT or SIGTERM. The peer of tests/interop/objects_bench.py and
// tests/interop/recovery_bench.py.
//
//	server -listen 127.0.0.1:0 -root DIR [-origin http://127.0.0.1:8080] [-cert C -key K]
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"

	"recoup/tests/peers/quicgo/internal/version"
)

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:4433", "UDP address to listen on (port 0 picks one)")
	root := flag.String("root", ".", "directory whose files are served")
	origin := flag.String("origin", "", "HTTP/1.1 origin (http://HOST:PORT) whose /live/ paths are relayed")
	certFile := flag.String("cert", "", "PEM certificate chain (with -key; default: a self-signed one)")
	keyFile := flag.String("key", "", "PEM private key (with -cert)")
	showVersion := flag.Bool("version", false, "print the quic-go version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.String())
		return
	}

	var cert tls.Certificate
	var err error
	if *certFile != "" || *keyFile != "" {
		cert, err = tls.LoadX509KeyPair(*certFile, *keyFile)
	} else {
		cert, err = selfSigned()
	}
	if err != nil {
		log.Fatalf("certificate: %v", err)
	}
	addr, err := net.ResolveUDPAddr("udp", *listen)
	if err != nil {
		log.Fatalf("listen address %q: %v", *listen, err)
	}
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		log.Fatalf("listen on %s: %v", *listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(*root)))
	if *origin != "" {
		target, err := url.Parse(*origin)
		if err != nil || target.Scheme != "http" || target.Host == "" {
			log.Fatalf("-origin %q: expected http://HOST:PORT", *origin)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.FlushInterval = -1
		mux.Handle("/live/", proxy)
	}
	server := &http3.Server{
		Handler:    mux,
		TLSConfig:  http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		QUICConfig: &quic.Config{Tracer: qlog.DefaultConnectionTracer},
	}
	fmt.Printf("listening on %s\n", conn.LocalAddr())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		// Close flushes the qlog traces of the open connections.
		server.Close()
		conn.Close()
	}()
	if err := server.Serve(conn); err != nil && err != http.ErrServerClosed && err != quic.ErrServerClosed {
		log.Printf("serve: %v", err)
	}
}
