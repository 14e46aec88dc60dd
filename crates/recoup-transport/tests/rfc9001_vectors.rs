//! RFC 9001 Appendix A: sample packet protection, to the byte, through the public API.
//!
//! rustls does not expose the raw Initial keys, so `initial_keys` is checked through the packets
//! it protects (A.2, A.3). The A.1 key schedule itself is checked with rustls' public HKDF, which
//! the A.5 test also uses to build ChaCha20-Poly1305 keys from a raw secret.

use rustls::crypto::cipher::{AeadKey, Iv};
use rustls::crypto::tls13::{HkdfExpander, OkmBlock};
use rustls::Tls13CipherSuite;

use recoup_transport::{initial_keys, PacketProtection, Side};

/// Hex with whitespace, as the RFC prints it.
fn hex(s: &str) -> Vec<u8> {
    let compact: String = s.split_whitespace().collect();
    hex::decode(compact).expect("valid hex in a test vector")
}

const DCID: &str = "8394c8f03e515708";

/// RFC 9001 §5.2.
const INITIAL_SALT: &str = "38762cf7f55934b34d179ae6a4c80cadccbb7f0a";

fn tls13_suite(suite: rustls::SupportedCipherSuite) -> &'static Tls13CipherSuite {
    match suite {
        rustls::SupportedCipherSuite::Tls13(s) => s,
        _ => panic!("not a TLS 1.3 suite"),
    }
}

/// The HkdfLabel of RFC 8446 §7.1 with an empty context, as the pieces HKDF-Expand joins.
fn hkdf_label(label: &[u8], len: usize) -> Vec<u8> {
    let mut info = (len as u16).to_be_bytes().to_vec();
    info.push((6 + label.len()) as u8);
    info.extend_from_slice(b"tls13 ");
    info.extend_from_slice(label);
    info.push(0);
    info
}

fn expand_label(expander: &dyn HkdfExpander, label: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    expander
        .expand_slice(&[&hkdf_label(label, len)], &mut out)
        .expect("output fits HKDF");
    out
}

// ---- A.1 -------------------------------------------------------------------------------------

#[test]
fn a1_key_schedule() {
    // The HkdfLabel bytes the RFC lists.
    assert_eq!(
        hkdf_label(b"client in", 32),
        hex("00200f746c73313320636c69656e7420696e00")
    );
    assert_eq!(
        hkdf_label(b"server in", 32),
        hex("00200f746c7331332073657276657220696e00")
    );
    assert_eq!(
        hkdf_label(b"quic key", 16),
        hex("00100e746c7331332071756963206b657900")
    );
    assert_eq!(
        hkdf_label(b"quic iv", 12),
        hex("000c0d746c733133207175696320697600")
    );
    assert_eq!(
        hkdf_label(b"quic hp", 16),
        hex("00100d746c733133207175696320687000")
    );

    let hkdf =
        tls13_suite(rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256).hkdf_provider;
    let initial = hkdf.extract_from_secret(Some(&hex(INITIAL_SALT)), &hex(DCID));
    // rustls keeps the PRK (initial_secret = 7db5df06...) inside the expander; its two children
    // check it.
    let client = expand_label(initial.as_ref(), b"client in", 32);
    assert_eq!(
        client,
        hex("c00cf151ca5be075ed0ebfb5c80323c4 2d6b7db67881289af4008f1f6c357aea")
    );
    let server = expand_label(initial.as_ref(), b"server in", 32);
    assert_eq!(
        server,
        hex("3c199828fd139efd216c155ad844cc81 fb82fa8d7446fa7d78be803acdda951b")
    );

    let c = hkdf.expander_for_okm(&OkmBlock::new(&client));
    assert_eq!(
        expand_label(c.as_ref(), b"quic key", 16),
        hex("1f369613dd76d5467730efcbe3b1a22d")
    );
    assert_eq!(
        expand_label(c.as_ref(), b"quic iv", 12),
        hex("fa044b2f42a3fd3b46fb255c")
    );
    assert_eq!(
        expand_label(c.as_ref(), b"quic hp", 16),
        hex("9f50449e04a0e810283a1e9933adedd2")
    );
    let s = hkdf.expander_for_okm(&OkmBlock::new(&server));
    assert_eq!(
        expand_label(s.as_ref(), b"quic key", 16),
        hex("cf3a5331653c364c88f0f379b6067e37")
    );
    assert_eq!(
        expand_label(s.as_ref(), b"quic iv", 12),
        hex("0ac1493ca1905853b0bba03e")
    );
    assert_eq!(
        expand_label(s.as_ref(), b"quic hp", 16),
        hex("c206b8d9b9f0f37644430b490eeaa314")
    );
}

// ---- A.2 -------------------------------------------------------------------------------------

const A2_HEADER: &str = "c300000001088394c8f03e5157080000449e00000002";

const A2_CRYPTO_FRAME: &str = "
    060040f1010000ed0303ebf8fa56f129 39b9584a3896472ec40bb863cfd3e868
    04fe3a47f06a2b69484c000004130113 02010000c000000010000e00000b6578
    616d706c652e636f6dff01000100000a 00080006001d00170018001000070005
    04616c706e0005000501000000000033 00260024001d00209370b2c9caa47fba
    baf4559fedba753de171fa71f50f1ce1 5d43e994ec74d748002b000302030400
    0d0010000e0403050306030203080408 050806002d00020101001c0002400100
    3900320408ffffffffffffffff050480 00ffff07048000ffff08011001048000
    75300901100f088394c8f03e51570806 048000ffff";

const A2_PROTECTED: &str = "
    c000000001088394c8f03e5157080000 449e7b9aec34d1b1c98dd7689fb8ec11
    d242b123dc9bd8bab936b47d92ec356c 0bab7df5976d27cd449f63300099f399
    1c260ec4c60d17b31f8429157bb35a12 82a643a8d2262cad67500cadb8e7378c
    8eb7539ec4d4905fed1bee1fc8aafba1 7c750e2c7ace01e6005f80fcb7df6212
    30c83711b39343fa028cea7f7fb5ff89 eac2308249a02252155e2347b63d58c5
    457afd84d05dfffdb20392844ae81215 4682e9cf012f9021a6f0be17ddd0c208
    4dce25ff9b06cde535d0f920a2db1bf3 62c23e596d11a4f5a6cf3948838a3aec
    4e15daf8500a6ef69ec4e3feb6b1d98e 610ac8b7ec3faf6ad760b7bad1db4ba3
    485e8a94dc250ae3fdb41ed15fb6a8e5 eba0fc3dd60bc8e30c5c4287e53805db
    059ae0648db2f64264ed5e39be2e20d8 2df566da8dd5998ccabdae053060ae6c
    7b4378e846d29f37ed7b4ea9ec5d82e7 961b7f25a9323851f681d582363aa5f8
    9937f5a67258bf63ad6f1a0b1d96dbd4 faddfcefc5266ba6611722395c906556
    be52afe3f565636ad1b17d508b73d874 3eeb524be22b3dcbc2c7468d54119c74
    68449a13d8e3b95811a198f3491de3e7 fe942b330407abf82a4ed7c1b311663a
    c69890f4157015853d91e923037c227a 33cdd5ec281ca3f79c44546b9d90ca00
    f064c99e3dd97911d39fe9c5d0b23a22 9a234cb36186c4819e8b9c5927726632
    291d6a418211cc2962e20fe47feb3edf 330f2c603a9d48c0fcb5699dbfe58964
    25c5bac4aee82e57a85aaf4e2513e4f0 5796b07ba2ee47d80506f8d2c25e50fd
    14de71e6c418559302f939b0e1abd576 f279c4b2e0feb85c1f28ff18f58891ff
    ef132eef2fa09346aee33c28eb130ff2 8f5b766953334113211996d20011a198
    e3fc433f9f2541010ae17c1bf202580f 6047472fb36857fe843b19f5984009dd
    c324044e847a4f4a0ab34f719595de37 252d6235365e9b84392b061085349d73
    203a4a13e96f5432ec0fd4a1ee65accd d5e3904df54c1da510b0ff20dcc0c77f
    cb2c0e0eb605cb0504db87632cf3d8b4 dae6e705769d1de354270123cb11450e
    fc60ac47683d7b8d0f811365565fd98c 4c8eb936bcab8d069fc33bd801b03ade
    a2e1fbc5aa463d08ca19896d2bf59a07 1b851e6c239052172f296bfb5e724047
    90a2181014f3b94a4e97d117b4381303 68cc39dbb2d198065ae3986547926cd2
    162f40a29f0c3c8745c0f50fba3852e5 66d44575c29d39a03f0cda721984b6f4
    40591f355e12d439ff150aab7613499d bd49adabc8676eef023b15b65bfc5ca0
    6948109f23f350db82123535eb8a7433 bdabcb909271a6ecbcb58b936a88cd4e
    8f2e6ff5800175f113253d8fa9ca8885 c2f552e657dc603f252e1a8e308f76f0
    be79e2fb8f5d5fbbe2e30ecadd220723 c8c0aea8078cdfcb3868263ff8f09400
    54da48781893a7e49ad5aff4af300cd8 04a6b6279ab3ff3afb64491c85194aab
    760d58a606654f9f4400e8b38591356f bf6425aca26dc85244259ff2b19c41b9
    f96f3ca9ec1dde434da7d2d392b905dd f3d1f9af93d1af5950bd493f5aa731b4
    056df31bd267b6b90a079831aaf579be 0a39013137aac6d404f518cfd4684064
    7e78bfe706ca4cf5e9c5453e9f7cfd2b 8b4c8d169a44e55c88d4a9a7f9474241
    e221af44860018ab0856972e194cd934";

/// The A.2 plaintext payload: the CRYPTO frame and PADDING up to 1162 bytes.
fn a2_payload() -> Vec<u8> {
    let mut payload = hex(A2_CRYPTO_FRAME);
    payload.resize(1162, 0);
    payload
}

#[test]
fn a2_client_initial_protect() {
    let header = hex(A2_HEADER);
    let mut packet = header.clone();
    packet.extend_from_slice(&a2_payload());
    assert_eq!(packet.len(), 22 + 1162);

    let keys = initial_keys(&hex(DCID), Side::Client);
    keys.local.seal(2, &mut packet, 18, 4).unwrap();

    let expected = hex(A2_PROTECTED);
    assert_eq!(expected.len(), 1200);
    // The sample and the masked header first, for a readable failure.
    assert_eq!(packet[22..38], hex("d1b1c98dd7689fb8ec11d242b123dc9b")[..]);
    assert_eq!(
        packet[..22],
        hex("c000000001088394c8f03e5157080000449e7b9aec34")[..]
    );
    assert_eq!(packet, expected);
}

#[test]
fn a2_client_initial_unprotect() {
    let mut packet = hex(A2_PROTECTED);
    let keys = initial_keys(&hex(DCID), Side::Server);
    let (pn_len, truncated) = keys.remote.unprotect_header(&mut packet, 18).unwrap();
    assert_eq!((pn_len, truncated), (4, 2));
    assert_eq!(packet[..22], hex(A2_HEADER)[..]);
    let payload = keys.remote.open(2, &mut packet, 22).unwrap();
    assert_eq!(payload, &a2_payload()[..]);
}

// ---- A.3 -------------------------------------------------------------------------------------

const A3_HEADER: &str = "c1000000010008f067a5502a4262b50040750001";

const A3_PAYLOAD: &str = "
    02000000000600405a020000560303ee fce7f7b37ba1d1632e96677825ddf739
    88cfc79825df566dc5430b9a045a1200 130100002e00330024001d00209d3c94
    0d89690b84d08a60993c144eca684d10 81287c834d5311bcf32bb9da1a002b00
    020304";

const A3_PROTECTED: &str = "
    cf000000010008f067a5502a4262b500 4075c0d95a482cd0991cd25b0aac406a
    5816b6394100f37a1c69797554780bb3 8cc5a99f5ede4cf73c3ec2493a1839b3
    dbcba3f6ea46c5b7684df3548e7ddeb9 c3bf9c73cc3f3bded74b562bfb19fb84
    022f8ef4cdd93795d77d06edbb7aaf2f 58891850abbdca3d20398c276456cbc4
    2158407dd074ee";

#[test]
fn a3_server_initial() {
    // Type, version, DCID length 0, SCID length 8 + SCID, token length 0, length 0x4075.
    let pn_offset = 1 + 4 + 1 + 1 + 8 + 1 + 2;
    let header = hex(A3_HEADER);
    assert_eq!(header.len(), pn_offset + 2);
    let mut packet = header.clone();
    packet.extend_from_slice(&hex(A3_PAYLOAD));

    // Both sides derive Initial keys from the client's original Destination Connection ID.
    let server = initial_keys(&hex(DCID), Side::Server);
    server.local.seal(1, &mut packet, pn_offset, 2).unwrap();
    assert_eq!(
        packet[pn_offset + 4..pn_offset + 20],
        hex("2cd0991cd25b0aac406a5816b6394100")[..]
    );
    assert_eq!(
        packet[..pn_offset + 2],
        hex("cf000000010008f067a5502a4262b5004075c0d9")[..]
    );
    assert_eq!(packet, hex(A3_PROTECTED));

    let client = initial_keys(&hex(DCID), Side::Client);
    let (pn_len, truncated) = client
        .remote
        .unprotect_header(&mut packet, pn_offset)
        .unwrap();
    assert_eq!((pn_len, truncated), (2, 1));
    assert_eq!(packet[..pn_offset + 2], header[..]);
    let payload = client.remote.open(1, &mut packet, pn_offset + 2).unwrap();
    assert_eq!(payload, &hex(A3_PAYLOAD)[..]);
}

// ---- A.5 -------------------------------------------------------------------------------------

const A5_SECRET: &str = "9ac312a7f877468ebe69422748ad00a1 5443f18203a07d6060f688f30f21632b";
const A5_PN: u64 = 654_360_564;

/// ChaCha20-Poly1305 keys for one direction, from a raw traffic secret (RFC 9001 §5.1).
fn chacha_keys_from_secret(secret: &[u8]) -> PacketProtection {
    let suite = tls13_suite(rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256);
    let expander = suite.hkdf_provider.expander_for_okm(&OkmBlock::new(secret));
    let key: [u8; 32] = expand_label(expander.as_ref(), b"quic key", 32)
        .try_into()
        .unwrap();
    let iv: [u8; 12] = expand_label(expander.as_ref(), b"quic iv", 12)
        .try_into()
        .unwrap();
    let hp: [u8; 32] = expand_label(expander.as_ref(), b"quic hp", 32)
        .try_into()
        .unwrap();
    let alg = suite.quic.expect("ChaCha20-Poly1305 supports QUIC");
    PacketProtection::new(
        alg.header_protection_key(AeadKey::from(hp)),
        alg.packet_key(AeadKey::from(key), Iv::new(iv)),
    )
}

#[test]
fn a5_derived_values() {
    let suite = tls13_suite(rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256);
    let expander = suite
        .hkdf_provider
        .expander_for_okm(&OkmBlock::new(&hex(A5_SECRET)));
    assert_eq!(
        expand_label(expander.as_ref(), b"quic key", 32),
        hex("c6d98ff3441c3fe1b2182094f69caa2e d4b716b65488960a7a984979fb23e1c8")
    );
    assert_eq!(
        expand_label(expander.as_ref(), b"quic iv", 12),
        hex("e0459b3474bdd0e44a41c144")
    );
    assert_eq!(
        expand_label(expander.as_ref(), b"quic hp", 32),
        hex("25a282b9e82f06f21f488917a4fc8f1b 73573685608597d0efcb076b0ab7a7a4")
    );
    assert_eq!(
        expand_label(expander.as_ref(), b"quic ku", 32),
        hex("1223504755036d556342ee9361d25342 1a826c9ecdf3c7148684b36b714881f9")
    );
}

#[test]
fn a5_chacha20_short_header() {
    let keys = chacha_keys_from_secret(&hex(A5_SECRET));
    assert_eq!(keys.tag_len(), 16);

    // Short header, no connection ID, 3-byte packet number 0x00bff4 (49140), payload PING.
    let mut packet = hex("4200bff4");
    packet.push(0x01);
    keys.seal(A5_PN, &mut packet, 1, 3).unwrap();
    assert_eq!(packet[4..], hex("655e5cd55c41f69080575d7999c25a5bfb")[..]);
    assert_eq!(packet, hex("4cfe4189655e5cd55c41f69080575d7999c25a5bfb"));

    let (pn_len, truncated) = keys.unprotect_header(&mut packet, 1).unwrap();
    assert_eq!((pn_len, truncated), (3, 49140));
    assert_eq!(packet[..4], hex("4200bff4")[..]);
    assert_eq!(keys.open(A5_PN, &mut packet, 4).unwrap(), &[0x01]);
}

#[test]
fn a5_packet_is_the_smallest_that_can_be_unprotected() {
    let keys = chacha_keys_from_secret(&hex(A5_SECRET));
    let packet = hex("4cfe4189655e5cd55c41f69080575d7999c25a5bfb");
    // One byte less and there is no full sample: a clean error, not a panic.
    let mut short = packet[..packet.len() - 1].to_vec();
    assert!(keys.unprotect_header(&mut short, 1).is_err());
    assert_eq!(short, packet[..packet.len() - 1]);
    // Wrong packet number: authentication fails.
    let mut p = packet.clone();
    keys.unprotect_header(&mut p, 1).unwrap();
    assert!(keys.open(A5_PN + 1, &mut p, 4).is_err());
}
