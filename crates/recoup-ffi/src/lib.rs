//! recoup's loss-recovery policies behind a C ABI, for servers written in C (an NGINX module, an
//! LSQUIC-based server like the papers' ones).
//!
//! The surface is the transport <-> policy contract of [`recoup_recovery::api`], one function per
//! event and question, on an opaque [`RecoupPolicy`] handle. The C header is
//! `include/recoup_policy.h` (cbindgen; `tests/header.rs` keeps it in sync). The host keeps the
//! lineage of lost data exactly as the Rust contract says and calls, per connection:
//!
//! 1. [`recoup_policy_new`] with a policy spec (`"autorec:alpha=30ms"`) and a seed;
//! 2. `recoup_policy_on_packet_sent` for every application-data packet, then for each packet one
//!    of `on_packet_acked` / `on_packet_lost` (a lost packet acked later gets `on_packet_acked`
//!    too);
//! 3. `on_data_lost` when a retransmission round of lost data starts (the host has queued its
//!    ARQ retransmission), `on_data_acked` once when every byte of a lineage is acknowledged;
//! 4. `on_rtt_update` after each RTT sample, `on_send_state` on every change of sending state;
//! 5. [`recoup_policy_poll_copy`] before building each packet, until it answers
//!    [`RecoupStatus::None`] or the host cannot send;
//! 6. [`recoup_policy_poll_timeout`] after any call, and `on_timeout` once that time has come.
//!
//! Times are nanoseconds since an epoch the host chooses (the same for all calls of a handle).
//! Every function returns a [`RecoupStatus`]; none panics across the boundary: a panic inside a
//! policy is caught, reported as [`RecoupStatus::Panic`], and the handle refuses further calls.
//! A handle is not thread-safe: use it from one thread at a time.

use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use recoup_recovery::{
    CopyRequest, DataRange, LossTrigger, LostData, PacketInfo, Policy, PolicySpec, RecoveryPolicy,
    RttSample, SendContext, SendKind, SendState, SentRange,
};
use recoup_time::Instant;

/// What a call did. Functions that answer a question (`poll_copy`, `poll_timeout`,
/// `rate_limit`) return `Ok` with their answer written, or `None` when there is no answer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoupStatus {
    Ok = 0,
    /// The question has no answer now (no copy to send, no timer, no rate limit).
    None = 1,
    /// A required pointer argument was NULL.
    NullPointer = 2,
    /// An argument is out of range (an unknown enum value, a range with end < start, ...).
    InvalidArgument = 3,
    /// The policy panicked; the handle refuses every further call except `recoup_policy_free`.
    Panic = 4,
}

/// Why a packet carries the stream data it carries (the `kind` field of [`RecoupPacket`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoupSendKind {
    /// First transmission of new data, or a packet with no stream data.
    New = 0,
    /// The ARQ retransmission that opens a round.
    Retransmission = 1,
    /// An extra copy asked for by the policy.
    Copy = 2,
}

/// What made the host declare a packet lost (RFC 9002 §6).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoupLossTrigger {
    /// RFC 9002 §6.1.1: kPacketThreshold later packets were acknowledged.
    PacketThreshold = 0,
    /// RFC 9002 §6.1.2: older than 9/8 of the RTT when a later packet was acknowledged.
    TimeThreshold = 1,
    /// RFC 9002 §6.2: probe timeout (or RACK-TLP's tail loss probe).
    Pto = 2,
}

/// What the sender could do when it last looked.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoupSendState {
    /// New data waiting and congestion window to send it.
    OnMode = 0,
    /// Application-limited: nothing new to send.
    OffMode = 1,
    /// New data waiting but the congestion window is full.
    CwndLimited = 2,
}

/// One stream range in a sent packet.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RecoupSentRange {
    pub stream: u64,
    /// First byte offset.
    pub start: u64,
    /// One past the last byte offset (`end == start` for a bare FIN).
    pub end: u64,
    /// Nonzero when the range is a retransmission or copy of lost data `loss_id`.
    pub has_loss_id: u8,
    pub loss_id: u64,
}

/// A packet as the policy sees it, on send, acknowledgement and loss.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RecoupPacket {
    pub pn: u64,
    pub sent_ns: u64,
    pub bytes: u64,
    /// A [`RecoupSendKind`].
    pub kind: u32,
    /// `ranges_len` ranges; may be NULL when `ranges_len` is 0.
    pub ranges: *const RecoupSentRange,
    pub ranges_len: usize,
}

/// A lost range and its lineage, reported when a retransmission round starts.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RecoupLostData {
    /// The host's identity for this lost data, kept by all its retransmissions and copies.
    pub id: u64,
    pub stream: u64,
    pub start: u64,
    pub end: u64,
    /// 1 for the first retransmission, n for the n-th.
    pub round: u32,
    pub first_sent_ns: u64,
    pub first_detected_ns: u64,
    /// When the send whose loss opened this round went out.
    pub lost_sent_ns: u64,
    /// A [`RecoupLossTrigger`].
    pub trigger: u32,
}

/// The host's RTT estimate after an update (RFC 9002 §5), in nanoseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RecoupRtt {
    pub latest_ns: u64,
    pub smoothed_ns: u64,
    pub min_ns: u64,
    pub var_ns: u64,
}

/// Where the host stands when it asks for a copy.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RecoupSendContext {
    /// A [`RecoupSendState`].
    pub state: u32,
    /// Packets sent so far in the application data space, every kind counted.
    pub packets_sent: u64,
    pub cwnd: u64,
    pub bytes_in_flight: u64,
    /// Nonzero when `bdp_packets` holds the congestion controller's bandwidth-delay product.
    pub has_bdp: u8,
    pub bdp_packets: u64,
}

/// A copy the policy wants sent now.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RecoupCopy {
    /// The lost data to copy.
    pub id: u64,
    /// Nonzero: send even if the congestion window is full (ART §6.4 "opportunism").
    pub beyond_cwnd: u8,
}

/// One policy for one connection. Opaque to C.
#[derive(Debug)]
pub struct RecoupPolicy {
    policy: Policy,
    name: CString,
    /// Reused for every packet's ranges so that events do not allocate.
    ranges: Vec<SentRange>,
    /// Set when the policy panicked: its state is no longer trustworthy.
    poisoned: bool,
}

fn instant(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

fn send_kind(v: u32) -> Option<SendKind> {
    Some(match v {
        0 => SendKind::New,
        1 => SendKind::Retransmission,
        2 => SendKind::Copy,
        _ => return None,
    })
}

fn loss_trigger(v: u32) -> Option<LossTrigger> {
    Some(match v {
        0 => LossTrigger::PacketThreshold,
        1 => LossTrigger::TimeThreshold,
        2 => LossTrigger::Pto,
        _ => return None,
    })
}

fn send_state(v: u32) -> Option<SendState> {
    Some(match v {
        0 => SendState::OnMode,
        1 => SendState::OffMode,
        2 => SendState::CwndLimited,
        _ => return None,
    })
}

fn data_range(stream: u64, start: u64, end: u64) -> Option<DataRange> {
    (end >= start).then_some(DataRange { stream, start, end })
}

/// The handle behind `p`, if any.
///
/// # Safety
/// `p` is NULL or a pointer returned by [`recoup_policy_new`] and not yet freed, used by one
/// thread at a time.
unsafe fn handle<'a>(p: *mut RecoupPolicy) -> Option<&'a mut RecoupPolicy> {
    // SAFETY: the caller guarantees `p` is NULL or a live, exclusively used handle.
    unsafe { p.as_mut() }
}

/// Runs `f` on `handle`, turning a missing handle, poison and panics into statuses.
fn guarded(
    handle: Option<&mut RecoupPolicy>,
    f: impl FnOnce(&mut RecoupPolicy) -> RecoupStatus,
) -> RecoupStatus {
    let Some(handle) = handle else {
        return RecoupStatus::NullPointer;
    };
    if handle.poisoned {
        return RecoupStatus::Panic;
    }
    match catch_unwind(AssertUnwindSafe(|| f(handle))) {
        Ok(status) => status,
        Err(_) => {
            handle.poisoned = true;
            RecoupStatus::Panic
        }
    }
}

/// Copies `msg` into the caller's buffer `err` of `err_len` bytes, truncated and NUL-terminated.
///
/// # Safety
/// `err` is NULL or valid for `err_len` bytes of writes.
unsafe fn write_error(err: *mut c_char, err_len: usize, msg: &str) {
    if err.is_null() || err_len == 0 {
        return;
    }
    let n = msg.len().min(err_len - 1);
    // SAFETY: `err` is valid for `err_len` bytes and n + 1 <= err_len; the source is a live &str
    // that cannot overlap a buffer the caller owns.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr().cast::<c_char>(), err, n);
        *err.add(n) = 0;
    }
}

/// Creates a policy from a spec such as `"arq"`, `"fixed:r=2"` or `"autorec:alpha=30ms,beta=0.3"`
/// (the syntax of `recoup run`'s policies). `seed` drives every random choice; the same spec and
/// seed give the same decisions. Returns NULL on a bad spec and writes the reason, NUL-terminated
/// and truncated to `err_len` bytes, into `err` (which may be NULL).
///
/// # Safety
/// `spec` is NULL or a NUL-terminated string; `err` is NULL or valid for `err_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_new(
    spec: *const c_char,
    seed: u64,
    err: *mut c_char,
    err_len: usize,
) -> *mut RecoupPolicy {
    if spec.is_null() {
        // SAFETY: forwarded caller guarantee on `err`.
        unsafe { write_error(err, err_len, "policy spec is NULL") };
        return std::ptr::null_mut();
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    let spec = unsafe { CStr::from_ptr(spec) };
    let built = catch_unwind(|| -> Result<RecoupPolicy, String> {
        let text = spec
            .to_str()
            .map_err(|_| "policy spec is not UTF-8".to_owned())?;
        let parsed: PolicySpec = text.parse().map_err(|e| format!("{e}"))?;
        let policy = parsed.build(seed);
        let name = CString::new(policy.name()).map_err(|e| e.to_string())?;
        Ok(RecoupPolicy {
            policy,
            name,
            ranges: Vec::new(),
            poisoned: false,
        })
    });
    match built {
        Ok(Ok(handle)) => Box::into_raw(Box::new(handle)),
        Ok(Err(msg)) => {
            // SAFETY: forwarded caller guarantee on `err`.
            unsafe { write_error(err, err_len, &msg) };
            std::ptr::null_mut()
        }
        Err(_) => {
            // SAFETY: forwarded caller guarantee on `err`.
            unsafe { write_error(err, err_len, "policy construction panicked") };
            std::ptr::null_mut()
        }
    }
}

/// Frees a handle. NULL is ignored.
///
/// # Safety
/// `p` is NULL or a pointer returned by [`recoup_policy_new`], not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_free(p: *mut RecoupPolicy) {
    if !p.is_null() {
        // SAFETY: `p` came from Box::into_raw in recoup_policy_new and is freed once.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// The policy's short name (`"autorec"`), valid until the handle is freed; NULL for NULL.
///
/// # Safety
/// `p` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_name(p: *const RecoupPolicy) -> *const c_char {
    // SAFETY: the caller guarantees `p` is NULL or live.
    match unsafe { p.as_ref() } {
        Some(handle) => handle.name.as_ptr(),
        None => std::ptr::null(),
    }
}

/// Which packet event [`packet_event`] reports.
#[derive(Clone, Copy, Debug)]
enum PacketEvent {
    Sent,
    Acked,
    Lost(LossTrigger),
}

/// Converts `pkt` (reusing the handle's range buffer) and hands it to the policy.
///
/// # Safety
/// As [`handle`]; `pkt` is NULL or points to a packet whose `ranges` are valid for
/// `ranges_len` elements.
unsafe fn packet_event(
    p: *mut RecoupPolicy,
    now_ns: u64,
    pkt: *const RecoupPacket,
    event: PacketEvent,
) -> RecoupStatus {
    // SAFETY: the caller guarantees `pkt` is NULL or valid.
    let Some(pkt) = (unsafe { pkt.as_ref() }) else {
        return RecoupStatus::NullPointer;
    };
    let raw: &[RecoupSentRange] = if pkt.ranges_len == 0 {
        &[]
    } else if pkt.ranges.is_null() {
        return RecoupStatus::NullPointer;
    } else {
        // SAFETY: non-NULL and, by the caller's guarantee, valid for `ranges_len` elements.
        unsafe { std::slice::from_raw_parts(pkt.ranges, pkt.ranges_len) }
    };
    let Some(kind) = send_kind(pkt.kind) else {
        return RecoupStatus::InvalidArgument;
    };
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| {
        h.ranges.clear();
        for r in raw {
            let Some(range) = data_range(r.stream, r.start, r.end) else {
                return RecoupStatus::InvalidArgument;
            };
            let loss = (r.has_loss_id != 0).then_some(r.loss_id);
            h.ranges.push(SentRange { range, loss });
        }
        let info = PacketInfo {
            pn: pkt.pn,
            sent: instant(pkt.sent_ns),
            bytes: usize::try_from(pkt.bytes).unwrap_or(usize::MAX),
            kind,
            ranges: &h.ranges,
        };
        let now = instant(now_ns);
        match event {
            PacketEvent::Sent => h.policy.on_packet_sent(now, &info),
            PacketEvent::Acked => h.policy.on_packet_acked(now, &info),
            PacketEvent::Lost(trigger) => h.policy.on_packet_lost(now, &info, trigger),
        }
        RecoupStatus::Ok
    })
}

/// A packet of application data was sent.
///
/// # Safety
/// `p` is NULL or a live handle; `pkt` is NULL or a valid packet (see [`RecoupPacket`]).
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_on_packet_sent(
    p: *mut RecoupPolicy,
    now_ns: u64,
    pkt: *const RecoupPacket,
) -> RecoupStatus {
    // SAFETY: forwarded caller guarantees.
    unsafe { packet_event(p, now_ns, pkt, PacketEvent::Sent) }
}

/// A sent packet was acknowledged.
///
/// # Safety
/// As [`recoup_policy_on_packet_sent`].
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_on_packet_acked(
    p: *mut RecoupPolicy,
    now_ns: u64,
    pkt: *const RecoupPacket,
) -> RecoupStatus {
    // SAFETY: forwarded caller guarantees.
    unsafe { packet_event(p, now_ns, pkt, PacketEvent::Acked) }
}

/// A sent packet was declared lost; `trigger` is a [`RecoupLossTrigger`].
///
/// # Safety
/// As [`recoup_policy_on_packet_sent`].
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_on_packet_lost(
    p: *mut RecoupPolicy,
    now_ns: u64,
    pkt: *const RecoupPacket,
    trigger: u32,
) -> RecoupStatus {
    let Some(trigger) = loss_trigger(trigger) else {
        return RecoupStatus::InvalidArgument;
    };
    // SAFETY: forwarded caller guarantees.
    unsafe { packet_event(p, now_ns, pkt, PacketEvent::Lost(trigger)) }
}

/// A retransmission round of `lost` starts; the host has queued its ARQ retransmission.
///
/// # Safety
/// `p` is NULL or a live handle; `lost` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_on_data_lost(
    p: *mut RecoupPolicy,
    now_ns: u64,
    lost: *const RecoupLostData,
) -> RecoupStatus {
    // SAFETY: the caller guarantees `lost` is NULL or valid.
    let Some(l) = (unsafe { lost.as_ref() }) else {
        return RecoupStatus::NullPointer;
    };
    let (Some(range), Some(trigger)) = (
        data_range(l.stream, l.start, l.end),
        loss_trigger(l.trigger),
    ) else {
        return RecoupStatus::InvalidArgument;
    };
    if l.round == 0 {
        return RecoupStatus::InvalidArgument;
    }
    let data = LostData {
        id: l.id,
        range,
        round: l.round,
        first_sent: instant(l.first_sent_ns),
        first_detected: instant(l.first_detected_ns),
        lost_sent: instant(l.lost_sent_ns),
        trigger,
    };
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| {
        h.policy.on_data_lost(instant(now_ns), &data);
        RecoupStatus::Ok
    })
}

/// Every byte of lineage `id` is acknowledged (or its stream was reset): the policy forgets it.
///
/// # Safety
/// `p` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_on_data_acked(
    p: *mut RecoupPolicy,
    now_ns: u64,
    id: u64,
) -> RecoupStatus {
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| {
        h.policy.on_data_acked(instant(now_ns), id);
        RecoupStatus::Ok
    })
}

/// The host's RTT estimate changed.
///
/// # Safety
/// `p` is NULL or a live handle; `rtt` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_on_rtt_update(
    p: *mut RecoupPolicy,
    now_ns: u64,
    rtt: *const RecoupRtt,
) -> RecoupStatus {
    // SAFETY: the caller guarantees `rtt` is NULL or valid.
    let Some(r) = (unsafe { rtt.as_ref() }) else {
        return RecoupStatus::NullPointer;
    };
    let sample = RttSample {
        latest: Duration::from_nanos(r.latest_ns),
        smoothed: Duration::from_nanos(r.smoothed_ns),
        min: Duration::from_nanos(r.min_ns),
        var: Duration::from_nanos(r.var_ns),
    };
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| {
        h.policy.on_rtt_update(instant(now_ns), &sample);
        RecoupStatus::Ok
    })
}

/// The sending state changed; `state` is a [`RecoupSendState`]. Call on every transition.
///
/// # Safety
/// `p` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_on_send_state(
    p: *mut RecoupPolicy,
    now_ns: u64,
    state: u32,
) -> RecoupStatus {
    let Some(state) = send_state(state) else {
        return RecoupStatus::InvalidArgument;
    };
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| {
        h.policy.on_send_state(instant(now_ns), state);
        RecoupStatus::Ok
    })
}

/// Which lost data to copy in the packet about to be built: `Ok` with `*out` filled, or `None`.
///
/// # Safety
/// `p` is NULL or a live handle; `ctx` is NULL or valid; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_poll_copy(
    p: *mut RecoupPolicy,
    now_ns: u64,
    ctx: *const RecoupSendContext,
    out: *mut RecoupCopy,
) -> RecoupStatus {
    // SAFETY: the caller guarantees `ctx` is NULL or valid.
    let Some(c) = (unsafe { ctx.as_ref() }) else {
        return RecoupStatus::NullPointer;
    };
    if out.is_null() {
        return RecoupStatus::NullPointer;
    }
    let Some(state) = send_state(c.state) else {
        return RecoupStatus::InvalidArgument;
    };
    let context = SendContext {
        state,
        packets_sent: c.packets_sent,
        cwnd: c.cwnd,
        bytes_in_flight: c.bytes_in_flight,
        bdp_packets: (c.has_bdp != 0).then_some(c.bdp_packets),
    };
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| match h.policy.poll_copy(instant(now_ns), &context) {
        Some(CopyRequest { id, beyond_cwnd }) => {
            // SAFETY: `out` is non-NULL and, by the caller's guarantee, valid for a write.
            unsafe {
                out.write(RecoupCopy {
                    id,
                    beyond_cwnd: u8::from(beyond_cwnd),
                });
            }
            RecoupStatus::Ok
        }
        None => RecoupStatus::None,
    })
}

/// When the policy next wants `recoup_policy_on_timeout`: `Ok` with `*out_ns`, or `None`.
///
/// # Safety
/// `p` is NULL or a live handle; `out_ns` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_poll_timeout(
    p: *mut RecoupPolicy,
    out_ns: *mut u64,
) -> RecoupStatus {
    if out_ns.is_null() {
        return RecoupStatus::NullPointer;
    }
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| match h.policy.poll_timeout() {
        Some(at) => {
            // SAFETY: non-NULL and valid for a write by the caller's guarantee.
            unsafe { out_ns.write(at.as_nanos()) };
            RecoupStatus::Ok
        }
        None => RecoupStatus::None,
    })
}

/// The time given by `recoup_policy_poll_timeout` has come.
///
/// # Safety
/// `p` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_on_timeout(
    p: *mut RecoupPolicy,
    now_ns: u64,
) -> RecoupStatus {
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| {
        h.policy.on_timeout(instant(now_ns));
        RecoupStatus::Ok
    })
}

/// An upper bound on the sending rate in bytes per second (LADR's reactive rate limit): `Ok`
/// with `*out`, or `None` when the policy does not limit the rate now.
///
/// # Safety
/// `p` is NULL or a live handle; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn recoup_policy_rate_limit(
    p: *mut RecoupPolicy,
    out: *mut u64,
) -> RecoupStatus {
    if out.is_null() {
        return RecoupStatus::NullPointer;
    }
    // SAFETY: forwarded caller guarantee on `p`.
    let h = unsafe { handle(p) };
    guarded(h, |h| match h.policy.rate_limit() {
        Some(rate) => {
            // SAFETY: non-NULL and valid for a write by the caller's guarantee.
            unsafe { out.write(rate) };
            RecoupStatus::Ok
        }
        None => RecoupStatus::None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(spec: &str) -> Result<*mut RecoupPolicy, String> {
        let spec = CString::new(spec).expect("no NUL");
        let mut err = [0 as c_char; 128];
        // SAFETY: a valid C string and a buffer of the stated length.
        let p = unsafe { recoup_policy_new(spec.as_ptr(), 1, err.as_mut_ptr(), err.len()) };
        if p.is_null() {
            // SAFETY: recoup_policy_new NUL-terminates the message within the buffer.
            let msg = unsafe { CStr::from_ptr(err.as_ptr()) };
            Err(msg.to_string_lossy().into_owned())
        } else {
            Ok(p)
        }
    }

    #[test]
    fn bad_spec_is_an_error_naming_it() {
        let msg = new("nosuch").expect_err("unknown policy");
        assert!(msg.contains("nosuch"), "{msg}");
        let msg = new("autorec:alpha=fast").expect_err("bad value");
        assert!(msg.contains("alpha"), "{msg}");
    }

    #[test]
    fn error_message_is_truncated_to_the_buffer() {
        let spec = CString::new("nosuch").expect("no NUL");
        let mut err = [0x55 as c_char; 4];
        // SAFETY: a valid C string and a buffer of the stated length.
        let p = unsafe { recoup_policy_new(spec.as_ptr(), 1, err.as_mut_ptr(), err.len()) };
        assert!(p.is_null());
        assert_eq!(err[3], 0, "NUL-terminated within the buffer");
    }

    #[test]
    fn null_and_invalid_arguments_are_statuses_not_crashes() {
        let p = new("autorec").expect("valid");
        let mut out = RecoupCopy::default();
        let ctx = RecoupSendContext {
            state: RecoupSendState::OffMode as u32,
            packets_sent: 0,
            cwnd: 12_000,
            bytes_in_flight: 0,
            has_bdp: 0,
            bdp_packets: 0,
        };
        // SAFETY: `p` is live; the other pointers are valid or deliberately NULL.
        unsafe {
            assert_eq!(
                recoup_policy_poll_copy(std::ptr::null_mut(), 0, &ctx, &mut out),
                RecoupStatus::NullPointer
            );
            assert_eq!(
                recoup_policy_poll_copy(p, 0, std::ptr::null(), &mut out),
                RecoupStatus::NullPointer
            );
            let bad_state = RecoupSendContext { state: 9, ..ctx };
            assert_eq!(
                recoup_policy_poll_copy(p, 0, &bad_state, &mut out),
                RecoupStatus::InvalidArgument
            );
            assert_eq!(
                recoup_policy_on_send_state(p, 0, 7),
                RecoupStatus::InvalidArgument
            );
            let bad = RecoupSentRange {
                stream: 0,
                start: 10,
                end: 5,
                has_loss_id: 0,
                loss_id: 0,
            };
            let pkt = RecoupPacket {
                pn: 0,
                sent_ns: 0,
                bytes: 1200,
                kind: 0,
                ranges: &bad,
                ranges_len: 1,
            };
            assert_eq!(
                recoup_policy_on_packet_sent(p, 0, &pkt),
                RecoupStatus::InvalidArgument
            );
            let pkt = RecoupPacket {
                ranges: std::ptr::null(),
                ..pkt
            };
            assert_eq!(
                recoup_policy_on_packet_sent(p, 0, &pkt),
                RecoupStatus::NullPointer
            );
            let name = CStr::from_ptr(recoup_policy_name(p));
            assert_eq!(name.to_str(), Ok("autorec"));
            recoup_policy_free(p);
            recoup_policy_free(std::ptr::null_mut());
        }
    }
}
