/*
 * A C host driving a recoup policy through a loss episode, the way a C QUIC server would:
 * a 30 fps live stream (14 packets of 1200 bytes per frame, so off-mode gaps between frames),
 * 60 ms RTT, 10 % of packets lost by a fixed pseudo-random draw, ARQ retransmission rounds kept
 * by the host (only the newest send of a lost range is checked for loss), and the policy asked
 * for copies before every packet and in off-mode.
 *
 * Every call and its answer is printed, one line each, so that tests/c_abi.rs can replay the
 * same calls on the Rust policy and check that the decisions are equal.
 *
 * usage: loss_episode SPEC SEED
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recoup_policy.h"

#define MS 1000000ull
#define MAX_PACKETS 8192
#define MAX_LINEAGES 4096
#define PACKET_BYTES 1200u
#define PACKETS_PER_FRAME 14u
#define FRAME_MS 33u
#define RUN_MS 3000u
#define RTT_MS 60u
/* RFC 9002 §6.1.2: a packet is lost once 9/8 of the RTT passed since it was sent. */
#define LOSS_DELAY_NS (RTT_MS * MS * 9 / 8)

typedef struct {
    RecoupPacket info;
    RecoupSentRange range;
    int lost;  /* the network drops it */
    int done;  /* acked or declared lost */
} Packet;

typedef struct {
    uint64_t stream, start, end;
    uint64_t newest_pn;
    uint64_t first_sent, first_detected;
    uint32_t round;
    int acked;
    int rtx_pending;
} Lineage;

static Packet packets[MAX_PACKETS];
/* RFC 9002 §5.3 estimator state, fed by one-way delays that vary per packet. */
static uint64_t srtt, rttvar, min_rtt;
static uint64_t n_packets;
static Lineage lineages[MAX_LINEAGES];
static uint64_t n_lineages;
static RecoupPolicy *policy;
static uint64_t rng_state;

static void check(RecoupStatus s, const char *what) {
    if (s != RECOUP_STATUS_OK && s != RECOUP_STATUS_NONE) {
        fprintf(stderr, "%s failed with status %d\n", what, (int)s);
        exit(2);
    }
}

/* A fixed LCG (Knuth's MMIX constants): the same drops on every platform. */
static int drop_next(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (rng_state >> 33) % 100 < 10;
}

static void print_packet(const RecoupPacket *p) {
    printf(" %" PRIu64 " %" PRIu64 " %" PRIu64 " %u %zu", p->pn, p->sent_ns, p->bytes, p->kind,
           p->ranges_len);
    for (size_t i = 0; i < p->ranges_len; i++) {
        const RecoupSentRange *r = &p->ranges[i];
        printf(" %" PRIu64 " %" PRIu64 " %" PRIu64 " %u %" PRIu64, r->stream, r->start, r->end,
               (unsigned)r->has_loss_id, r->loss_id);
    }
}

static uint64_t bytes_in_flight(void) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n_packets; i++)
        if (!packets[i].done) sum += packets[i].info.bytes;
    return sum;
}

static void send_packet(uint64_t now, uint32_t kind, uint64_t stream, uint64_t start, uint64_t end,
                        int has_id, uint64_t id) {
    if (n_packets == MAX_PACKETS) {
        fprintf(stderr, "packet table full\n");
        exit(2);
    }
    Packet *p = &packets[n_packets];
    p->range = (RecoupSentRange){stream, start, end, (uint8_t)has_id, id};
    p->info = (RecoupPacket){n_packets, now, PACKET_BYTES, kind, &p->range, 1};
    p->lost = drop_next();
    p->done = 0;
    if (has_id) lineages[id].newest_pn = n_packets;
    n_packets++;
    printf("sent %" PRIu64, now);
    print_packet(&p->info);
    RecoupStatus s = recoup_policy_on_packet_sent(policy, now, &p->info);
    printf(" = %d\n", (int)s);
    check(s, "on_packet_sent");
}

static void start_round(uint64_t now, uint64_t id, const Packet *p) {
    Lineage *l = &lineages[id];
    l->round++;
    l->rtx_pending = 1;
    RecoupLostData d = {id, l->stream, l->start, l->end, l->round, l->first_sent,
                        l->first_detected, p->info.sent_ns, RECOUP_LOSS_TRIGGER_TIME_THRESHOLD};
    printf("data_lost %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %u %" PRIu64
           " %" PRIu64 " %" PRIu64 " %u",
           now, d.id, d.stream, d.start, d.end, d.round, d.first_sent_ns, d.first_detected_ns,
           d.lost_sent_ns, d.trigger);
    RecoupStatus s = recoup_policy_on_data_lost(policy, now, &d);
    printf(" = %d\n", (int)s);
    check(s, "on_data_lost");
}

/* Acks and loss declarations due by `now`, in packet-number order. */
static void settle(uint64_t now) {
    for (uint64_t i = 0; i < n_packets; i++) {
        Packet *p = &packets[i];
        if (p->done) continue;
        /* The path's delay varies by 0-6 ms per packet so that every RTT field moves. */
        uint64_t rtt_ns = (RTT_MS + p->info.pn % 7) * MS;
        if (!p->lost && p->info.sent_ns + rtt_ns <= now) {
            p->done = 1;
            printf("acked %" PRIu64, now);
            print_packet(&p->info);
            RecoupStatus s = recoup_policy_on_packet_acked(policy, now, &p->info);
            printf(" = %d\n", (int)s);
            check(s, "on_packet_acked");
            if (srtt == 0) {
                srtt = rtt_ns;
                rttvar = rtt_ns / 2;
                min_rtt = rtt_ns;
            } else {
                uint64_t dev = srtt > rtt_ns ? srtt - rtt_ns : rtt_ns - srtt;
                rttvar = (3 * rttvar + dev) / 4;
                srtt = (7 * srtt + rtt_ns) / 8;
                if (rtt_ns < min_rtt) min_rtt = rtt_ns;
            }
            RecoupRtt rtt = {rtt_ns, srtt, min_rtt, rttvar};
            printf("rtt %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, now,
                   rtt.latest_ns, rtt.smoothed_ns, rtt.min_ns, rtt.var_ns);
            s = recoup_policy_on_rtt_update(policy, now, &rtt);
            printf(" = %d\n", (int)s);
            check(s, "on_rtt_update");
            if (p->range.has_loss_id && !lineages[p->range.loss_id].acked) {
                lineages[p->range.loss_id].acked = 1;
                lineages[p->range.loss_id].rtx_pending = 0;
                printf("data_acked %" PRIu64 " %" PRIu64, now, p->range.loss_id);
                s = recoup_policy_on_data_acked(policy, now, p->range.loss_id);
                printf(" = %d\n", (int)s);
                check(s, "on_data_acked");
            }
        } else if (p->lost && p->info.sent_ns + LOSS_DELAY_NS <= now) {
            p->done = 1;
            printf("lost %" PRIu64 " %u", now, (unsigned)RECOUP_LOSS_TRIGGER_TIME_THRESHOLD);
            print_packet(&p->info);
            RecoupStatus s = recoup_policy_on_packet_lost(policy, now, &p->info,
                                                          RECOUP_LOSS_TRIGGER_TIME_THRESHOLD);
            printf(" = %d\n", (int)s);
            check(s, "on_packet_lost");
            if (!p->range.has_loss_id) {
                if (n_lineages == MAX_LINEAGES) {
                    fprintf(stderr, "lineage table full\n");
                    exit(2);
                }
                uint64_t id = n_lineages++;
                lineages[id] = (Lineage){p->range.stream, p->range.start, p->range.end, p->info.pn,
                                         p->info.sent_ns, now, 0, 0, 0};
                start_round(now, id, p);
            } else {
                Lineage *l = &lineages[p->range.loss_id];
                /* Only the newest send of a lineage is checked for loss (AutoRec §V-B). */
                if (!l->acked && l->newest_pn == p->info.pn) start_round(now, p->range.loss_id, p);
            }
        }
    }
}

static int ask_copy(uint64_t now, uint32_t state) {
    RecoupSendContext ctx = {state, n_packets, 1000000, bytes_in_flight(), 0, 0};
    RecoupCopy copy = {0, 0};
    printf("poll %" PRIu64 " %u %" PRIu64 " %" PRIu64 " %" PRIu64 " %u %" PRIu64, now, ctx.state,
           ctx.packets_sent, ctx.cwnd, ctx.bytes_in_flight, (unsigned)ctx.has_bdp,
           ctx.bdp_packets);
    RecoupStatus s = recoup_policy_poll_copy(policy, now, &ctx, &copy);
    printf(" = %d %" PRIu64 " %u\n", (int)s, copy.id, (unsigned)copy.beyond_cwnd);
    check(s, "poll_copy");
    if (s != RECOUP_STATUS_OK) return 0;
    if (copy.id >= n_lineages) {
        fprintf(stderr, "policy asked to copy unknown lineage %" PRIu64 "\n", copy.id);
        exit(2);
    }
    Lineage *l = &lineages[copy.id];
    send_packet(now, RECOUP_SEND_KIND_COPY, l->stream, l->start, l->end, 1, copy.id);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SPEC SEED\n", argv[0]);
        return 2;
    }
    char err[256];
    uint64_t seed = strtoull(argv[2], NULL, 10);
    policy = recoup_policy_new(argv[1], seed, err, sizeof err);
    if (!policy) {
        fprintf(stderr, "recoup_policy_new: %s\n", err);
        return 2;
    }
    rng_state = seed;
    printf("policy %s %" PRIu64 "\n", recoup_policy_name(policy), seed);

    uint64_t offset = 0;
    uint32_t state = 99;
    for (uint64_t t_ms = 0; t_ms <= RUN_MS + 500; t_ms++) {
        uint64_t now = t_ms * MS;
        settle(now);

        uint64_t at = 0;
        RecoupStatus s = recoup_policy_poll_timeout(policy, &at);
        printf("poll_timeout = %d %" PRIu64 "\n", (int)s, s == RECOUP_STATUS_OK ? at : 0);
        check(s, "poll_timeout");
        if (s == RECOUP_STATUS_OK && at <= now) {
            printf("timeout %" PRIu64, now);
            s = recoup_policy_on_timeout(policy, now);
            printf(" = %d\n", (int)s);
            check(s, "on_timeout");
        }

        /* A frame's packets go out one per millisecond from the frame's start. */
        uint64_t in_frame = t_ms % FRAME_MS;
        int new_data = t_ms < RUN_MS && in_frame < PACKETS_PER_FRAME;
        int rtx = -1;
        for (uint64_t i = 0; i < n_lineages; i++)
            if (lineages[i].rtx_pending && !lineages[i].acked) {
                rtx = (int)i;
                break;
            }
        uint32_t next = (new_data || rtx >= 0) ? RECOUP_SEND_STATE_ON_MODE
                                               : RECOUP_SEND_STATE_OFF_MODE;
        if (next != state) {
            state = next;
            printf("state %" PRIu64 " %u", now, state);
            s = recoup_policy_on_send_state(policy, now, state);
            printf(" = %d\n", (int)s);
            check(s, "on_send_state");
        }

        if (state == RECOUP_SEND_STATE_OFF_MODE) {
            /* Off-mode: room for a few copies in this millisecond. */
            for (int k = 0; k < 4 && ask_copy(now, state); k++) {
            }
            continue;
        }
        ask_copy(now, state);
        if (rtx >= 0) {
            Lineage *l = &lineages[rtx];
            l->rtx_pending = 0;
            send_packet(now, RECOUP_SEND_KIND_RETRANSMISSION, l->stream, l->start, l->end, 1,
                        (uint64_t)rtx);
        }
        if (new_data) {
            send_packet(now, RECOUP_SEND_KIND_NEW, 0, offset, offset + PACKET_BYTES, 0, 0);
            offset += PACKET_BYTES;
        }
    }
    recoup_policy_free(policy);
    return 0;
}
