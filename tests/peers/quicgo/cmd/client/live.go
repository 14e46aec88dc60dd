package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"time"
)

// The frame header of recoup's live streams (crates/recoup-apps/src/frame.rs): magic "RCPF",
// version 1, kind, 2 reserved bytes, then big-endian sequence u64, capture time u64
// (microseconds on the sender's clock), payload length u32 and the payload's CRC-32 (IEEE).
const (
	frameHeaderLen = 32
	frameVersion   = 1
	maxPayload     = 1 << 30
)

// liveFrame is one JSON line per frame: its sequence number and capture time from its header,
// when its last byte was read (microseconds since the Unix epoch, the clock the origin stamps
// capture times with when both run on one machine), its length with the header, and whether its
// checksum matched.
type liveFrame struct {
	Seq       uint64 `json:"seq"`
	CaptureUs uint64 `json:"capture_us"`
	ArrivalUs int64  `json:"arrival_us"`
	Bytes     int    `json:"bytes"`
	CrcOK     bool   `json:"crc_ok"`
}

// liveEnd is the last line: how the stream ended (an empty error is a clean end of body).
type liveEnd struct {
	End       bool   `json:"end"`
	ArrivalUs int64  `json:"arrival_us"`
	Bytes     int64  `json:"bytes"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
}

// playLive reads one streamed response as it arrives and writes a line per frame the moment
// its last byte is read.
func playLive(client *http.Client, url string, timeout time.Duration, enc *json.Encoder) {
	end := liveEnd{End: true}
	defer func() {
		end.ArrivalUs = time.Now().UnixMicro()
		enc.Encode(end)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	rsp, err := client.Do(req)
	if err != nil {
		end.Error = err.Error()
		return
	}
	defer rsp.Body.Close()
	end.Status = rsp.StatusCode
	if rsp.StatusCode != http.StatusOK {
		end.Error = fmt.Sprintf("status %d", rsp.StatusCode)
		return
	}
	buf := make([]byte, 64*1024)
	var head []byte
	var cur *liveFrame
	var remaining int
	var want uint32
	crc := crc32.NewIEEE()
	for {
		n, err := rsp.Body.Read(buf)
		now := time.Now().UnixMicro()
		end.Bytes += int64(n)
		data := buf[:n]
		for len(data) > 0 {
			if cur == nil {
				take := min(frameHeaderLen-len(head), len(data))
				head = append(head, data[:take]...)
				data = data[take:]
				if len(head) < frameHeaderLen {
					break
				}
				if string(head[:4]) != "RCPF" || head[4] != frameVersion {
					end.Error = fmt.Sprintf("bad frame header %x after %d bytes", head, end.Bytes)
					return
				}
				plen := binary.BigEndian.Uint32(head[24:28])
				if plen > maxPayload {
					end.Error = fmt.Sprintf("frame payload of %d bytes", plen)
					return
				}
				cur = &liveFrame{
					Seq:       binary.BigEndian.Uint64(head[8:16]),
					CaptureUs: binary.BigEndian.Uint64(head[16:24]),
					Bytes:     frameHeaderLen + int(plen),
				}
				want = binary.BigEndian.Uint32(head[28:32])
				remaining = int(plen)
				head = head[:0]
				crc.Reset()
			}
			take := min(remaining, len(data))
			crc.Write(data[:take])
			data = data[take:]
			remaining -= take
			if remaining == 0 {
				cur.ArrivalUs = now
				cur.CrcOK = crc.Sum32() == want
				enc.Encode(cur)
				cur = nil
			}
		}
		if errors.Is(err, io.EOF) {
			if cur != nil || len(head) > 0 {
				end.Error = "stream ended inside a frame"
			}
			return
		}
		if err != nil {
			end.Error = err.Error()
			return
		}
	}
}
