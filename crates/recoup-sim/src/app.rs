//! Which application a scenario runs: the simulator's choice among the applications of
//! `recoup-apps`, built per run and dispatched without boxing.

use std::time::Duration;

use recoup_apps::{
    gaming, live, moq, rtc, transfer, vod, FrameError, PacketFeedback, PathFeedback, StreamApp,
    StreamKey, Write,
};
use recoup_elements::element_rng;
use recoup_time::Instant;

/// Which application a scenario runs, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum AppSpec {
    Live(live::LiveConfig),
    File(transfer::FileConfig),
    Rpc(transfer::RpcConfig),
    Rtc(rtc::RtcConfig),
    Gaming(gaming::GamingConfig),
    Vod(vod::VodConfig),
    Moq(moq::MoqConfig),
}

impl AppSpec {
    /// The kind name used in scenario files.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Live(_) => "live",
            Self::File(_) => "file",
            Self::Rpc(_) => "rpc",
            Self::Rtc(_) => "rtc",
            Self::Gaming(_) => "gaming",
            Self::Vod(_) => "vod",
            Self::Moq(_) => "moq",
        }
    }

    /// Both endpoints of a run that starts at `start`, lasts `duration` and has scenario seed
    /// `seed` (frame-size noise draws from `element_rng(seed, "app/<kind>")`).
    #[must_use]
    pub fn build(&self, start: Instant, duration: Duration, seed: u64) -> AppPair {
        let rng = element_rng(seed, &format!("app/{}", self.kind()));
        match self {
            Self::Live(c) => AppPair {
                server: AppEndpoint::LiveSource(live::LiveSource::new(c, start, duration, rng)),
                client: AppEndpoint::LivePlayer(live::LivePlayer::new(c, start)),
            },
            Self::File(c) => AppPair {
                server: AppEndpoint::FileSender(transfer::FileSender::new(c, start)),
                client: AppEndpoint::FileReceiver(transfer::FileReceiver::new(c)),
            },
            Self::Rpc(c) => AppPair {
                server: AppEndpoint::RpcServer(transfer::RpcServer::new(c)),
                client: AppEndpoint::RpcClient(transfer::RpcClient::new(c, start)),
            },
            Self::Rtc(c) => AppPair {
                server: AppEndpoint::RtcSender(rtc::RtcSender::new(c, start, duration, rng)),
                client: AppEndpoint::RtcReceiver(rtc::RtcReceiver::new(c, start, duration)),
            },
            Self::Gaming(c) => AppPair {
                server: AppEndpoint::GamingSender(Box::new(gaming::GamingSender::new(
                    c, start, duration, rng,
                ))),
                client: AppEndpoint::GamingViewer(gaming::GamingViewer::new(c)),
            },
            Self::Vod(c) => AppPair {
                server: AppEndpoint::VodServer(vod::VodServer::new(c)),
                client: AppEndpoint::VodClient(vod::VodClient::new(c, start)),
            },
            Self::Moq(c) => AppPair {
                server: AppEndpoint::MoqPublisher(moq::MoqPublisher::new(c, start, duration, rng)),
                client: AppEndpoint::MoqSubscriber(moq::MoqSubscriber::new(c, start, duration)),
            },
        }
    }
}

/// The two endpoints of one run.
#[derive(Debug)]
pub struct AppPair {
    pub server: AppEndpoint,
    pub client: AppEndpoint,
}

/// Any built-in application endpoint (enum dispatch).
#[derive(Debug)]
pub enum AppEndpoint {
    LiveSource(live::LiveSource),
    LivePlayer(live::LivePlayer),
    FileSender(transfer::FileSender),
    FileReceiver(transfer::FileReceiver),
    RpcServer(transfer::RpcServer),
    RpcClient(transfer::RpcClient),
    RtcSender(rtc::RtcSender),
    RtcReceiver(rtc::RtcReceiver),
    /// Boxed: its frame book makes it far larger than the others.
    GamingSender(Box<gaming::GamingSender>),
    GamingViewer(gaming::GamingViewer),
    VodServer(vod::VodServer),
    VodClient(vod::VodClient),
    MoqPublisher(moq::MoqPublisher),
    MoqSubscriber(moq::MoqSubscriber),
}

/// What the receiving side of a run measured.
#[derive(Clone, Debug, PartialEq)]
pub enum AppOutcome {
    Live(live::LiveOutcome),
    /// File and RPC.
    Transfer(transfer::TransferOutcome),
    Rtc(rtc::RtcOutcome),
    /// Cloud gaming: the sender's frame metrics (LADR's are sender-side).
    Gaming(gaming::GamingOutcome),
    GamingViewer(gaming::GamingViewerOutcome),
    Vod(vod::VodOutcome),
    Moq(moq::MoqOutcome),
}

impl AppEndpoint {
    /// The measured outcome, on the receiving endpoint (player, file receiver, RPC client, RTC
    /// receiver, gaming viewer) and on the gaming sender (LADR measures at the sender); `None`
    /// on the other sending ones.
    #[must_use]
    pub fn outcome(&self) -> Option<AppOutcome> {
        match self {
            Self::LivePlayer(p) => Some(AppOutcome::Live(p.outcome())),
            Self::FileReceiver(r) => Some(AppOutcome::Transfer(r.outcome())),
            Self::RpcClient(c) => Some(AppOutcome::Transfer(c.outcome())),
            Self::RtcReceiver(r) => Some(AppOutcome::Rtc(r.outcome())),
            Self::GamingSender(s) => s.outcome().map(AppOutcome::Gaming),
            Self::GamingViewer(v) => Some(AppOutcome::GamingViewer(v.outcome())),
            Self::VodClient(c) => Some(AppOutcome::Vod(c.outcome())),
            Self::MoqSubscriber(s) => Some(AppOutcome::Moq(s.outcome())),
            _ => None,
        }
    }

    fn app(&mut self) -> &mut dyn StreamApp {
        match self {
            Self::LiveSource(a) => a,
            Self::LivePlayer(a) => a,
            Self::FileSender(a) => a,
            Self::FileReceiver(a) => a,
            Self::RpcServer(a) => a,
            Self::RpcClient(a) => a,
            Self::RtcSender(a) => a,
            Self::RtcReceiver(a) => a,
            Self::GamingSender(a) => &mut **a,
            Self::GamingViewer(a) => a,
            Self::VodServer(a) => a,
            Self::VodClient(a) => a,
            Self::MoqPublisher(a) => a,
            Self::MoqSubscriber(a) => a,
        }
    }

    fn app_ref(&self) -> &dyn StreamApp {
        match self {
            Self::LiveSource(a) => a,
            Self::LivePlayer(a) => a,
            Self::FileSender(a) => a,
            Self::FileReceiver(a) => a,
            Self::RpcServer(a) => a,
            Self::RpcClient(a) => a,
            Self::RtcSender(a) => a,
            Self::RtcReceiver(a) => a,
            Self::GamingSender(a) => &**a,
            Self::GamingViewer(a) => a,
            Self::VodServer(a) => a,
            Self::VodClient(a) => a,
            Self::MoqPublisher(a) => a,
            Self::MoqSubscriber(a) => a,
        }
    }
}

impl StreamApp for AppEndpoint {
    fn poll_write(&mut self, now: Instant, max: usize) -> Option<Write> {
        self.app().poll_write(now, max)
    }

    fn on_stream_bytes(
        &mut self,
        now: Instant,
        stream: StreamKey,
        data: &[u8],
        fin: bool,
    ) -> Result<(), FrameError> {
        self.app().on_stream_bytes(now, stream, data, fin)
    }

    fn on_feedback(&mut self, now: Instant, packets: &[PacketFeedback], path: PathFeedback) {
        self.app().on_feedback(now, packets, path);
    }

    fn wants_feedback(&self) -> bool {
        self.app_ref().wants_feedback()
    }

    fn poll_reset(&mut self, now: Instant, acked: &dyn Fn(StreamKey) -> u64) -> Option<StreamKey> {
        self.app().poll_reset(now, acked)
    }

    fn stream_deadline(&self, stream: StreamKey) -> Option<Instant> {
        self.app_ref().stream_deadline(stream)
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.app_ref().next_wakeup()
    }

    fn finish(&mut self, now: Instant) {
        self.app().finish(now);
    }
}
