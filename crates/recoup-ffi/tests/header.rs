//! `include/recoup_policy.h` is what cbindgen makes of `src/lib.rs`: a stale header fails here.
//! Regenerate it with `RECOUP_BLESS=1 cargo test -p recoup-ffi --test header`.

use std::path::Path;

#[test]
fn header_matches_the_rust_surface() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("cbindgen.toml: {e}"));
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen failed: {e}"))
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("cbindgen writes UTF-8");
    let path = crate_dir.join("include/recoup_policy.h");
    if std::env::var_os("RECOUP_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the header");
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with RECOUP_BLESS=1)", path.display()));
    assert!(
        committed == generated,
        "{} is stale: run RECOUP_BLESS=1 cargo test -p recoup-ffi --test header",
        path.display()
    );
}
