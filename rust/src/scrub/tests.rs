use super::*;

fn run(s: &str) -> (String, Vec<Finding>) {
    let (out, f) = scrub_bytes(s.as_bytes(), Options::default());
    (String::from_utf8(out).unwrap(), f)
}

#[test]
fn plain_lines_are_copied() {
    let line = "{\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":\"hello\"}}\n";
    assert_eq!(run(line).0, line);
}

#[test]
fn a_token_in_a_message_is_replaced_and_the_line_stays_json() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let line = format!("{{\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"use {tok}\\nplease\"}}]}}}}\n");
    let (out, f) = run(&line);
    assert!(!out.contains(tok));
    let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
    let text = v["message"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        format!(
            "use [REDACTED:github_token:{}]\nplease",
            hash6(tok.as_bytes())
        )
    );
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pointer.as_deref(), Some("/message/content/0/text"));
    assert_eq!(f[0].entry_id.as_deref(), Some("a1"));
    assert_eq!((f[0].start, f[0].end), (4, 4 + tok.len()));
}

#[test]
fn escapes_round_trip_as_json_stringify_writes_them() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let line = format!("{{\"a\":\"\\u0001 \\ud800 \\\"q\\\" \\/ {tok} é \\ud83d\\ude00\"}}");
    let (out, _) = run(&line);
    assert_eq!(
        out,
        format!(
            "{{\"a\":\"\\u0001 \\ud800 \\\"q\\\" / [REDACTED:github_token:{}] é 😀\"}}",
            hash6(tok.as_bytes())
        )
    );
}

#[test]
fn replay_fields_kept_or_dropped() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let line = format!("{{\"type\":\"message\",\"id\":\"a\",\"message\":{{\"content\":[{{\"thinkingSignature\":\"{tok}\",\"type\":\"thinking\",\"thinking\":\"x\"}},{{\"type\":\"text\",\"textSignature\":\"s\"}}]}}}}");
    let (out, _) = run(&line);
    assert_eq!(out, line);
    let (out, _) = scrub_bytes(
        line.as_bytes(),
        Options {
            header: false,
            replay: Replay::Drop,
        },
    );
    let out = String::from_utf8(out).unwrap();
    assert_eq!(out, "{\"type\":\"message\",\"id\":\"a\",\"message\":{\"content\":[{\"type\":\"thinking\",\"thinking\":\"x\"},{\"type\":\"text\"}]}}");
}

#[test]
fn torn_line_is_scrubbed_as_text() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let mut line = format!("{{\"type\":\"message\",\"text\":\"{tok} ").into_bytes();
    line.push(0xff);
    let (out, f) = scrub_bytes(&line, Options::default());
    assert!(!String::from_utf8_lossy(&out).contains(tok));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pointer, None);
}

/// `SCRUB_PROFILE=file cargo test --profile dev-fast --lib scrub::tests::profile -- --ignored --nocapture`
#[test]
#[ignore]
fn profile() {
    let Ok(p) = std::env::var("SCRUB_PROFILE") else {
        return;
    };
    let data = std::fs::read(p).unwrap();
    let e = engine();
    let t = std::time::Instant::now();
    let (mut lines, mut hit_lines, mut hits) = (0, 0, 0usize);
    for line in data.split(|&b| b == b'\n') {
        lines += 1;
        let k = e.ac.find_overlapping_iter(line).count();
        hits += k;
        hit_lines += (k > 0) as usize;
    }
    let ac = t.elapsed();
    let t = std::time::Instant::now();
    let mut p = crate::json::LineParser::new();
    for line in data.split(|&b| b == b'\n') {
        let _ = p.parse(line);
    }
    let parse = t.elapsed();
    let t = std::time::Instant::now();
    let mut s = Scrubber::new(Options::default());
    s.record = false;
    let mut out = Vec::with_capacity(data.len());
    s.feed(&data, &mut out);
    let full = t.elapsed();
    let mb = data.len() as f64 / 1e6;
    eprintln!("lines {lines} hit_lines {hit_lines} hits {hits}");
    eprintln!(
        "ac {:.0} MB/s, parse {:.0} MB/s, full {:.0} MB/s",
        mb / ac.as_secs_f64(),
        mb / parse.as_secs_f64(),
        mb / full.as_secs_f64()
    );
    let mut per = std::collections::HashMap::new();
    for line in data.split(|&b| b == b'\n').take(200000) {
        for m in e.ac.find_overlapping_iter(line) {
            *per.entry(m.pattern().as_usize()).or_insert(0usize) += 1;
        }
    }
    let mut v: Vec<_> = per.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    let names = lit_names();
    let v: Vec<_> = v.iter().map(|(k, c)| (names[*k].as_str(), *c)).collect();
    eprintln!("{:?}", &v[..v.len().min(12)]);
    for kind in [
        aho_corasick::AhoCorasickKind::DFA,
        aho_corasick::AhoCorasickKind::ContiguousNFA,
    ] {
        let ac = AhoCorasick::builder()
            .kind(Some(kind))
            .build(&names)
            .unwrap();
        let t = std::time::Instant::now();
        let k = ac.find_overlapping_iter(&data).count();
        let a = t.elapsed();
        let t = std::time::Instant::now();
        let k2 = ac.find_iter(&data).count();
        let b = t.elapsed();
        eprintln!(
            "{kind:?}: overlapping {k} {:.0} MB/s, find_iter {k2} {:.0} MB/s",
            mb / a.as_secs_f64(),
            mb / b.as_secs_f64()
        );
    }
}

#[test]
fn a_secret_key_is_replaced_and_never_in_a_pointer() {
    let tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let line =
        format!("{{\"type\":\"custom\",\"id\":\"c\",\"data\":{{\"{tok}\":{{\"x\":\"{tok}\"}}}}}}");
    let (out, f) = run(&line);
    assert!(!out.contains(tok));
    assert_eq!(f.len(), 2);
    for x in &f {
        assert!(!x.pointer.as_deref().unwrap().contains(tok), "{x:?}");
    }
    assert!(f.iter().any(|x| x.in_key));
}

/// The kinds found in one string (as a message's text), in order.
fn kinds_in(text: &str) -> Vec<&'static str> {
    let line = serde_json::json!({"type":"message","id":"a1","parentId":null,
        "message":{"role":"user","content":text}})
    .to_string();
    run(&line).1.iter().map(|f| f.kind).collect()
}

/// The scrubbed text of one string.
fn scrubbed(text: &str) -> String {
    let line = serde_json::json!({"type":"message","id":"a1","parentId":null,
        "message":{"role":"user","content":text}})
    .to_string();
    let v: serde_json::Value = serde_json::from_str(run(&line).0.trim_end()).unwrap();
    v["message"]["content"].as_str().unwrap().to_string()
}

#[test]
fn an_empty_assignment_never_takes_the_next_line() {
    // `snowflake.password=` with nothing after it: the next line is not its value
    let text =
        "snowflake.user=bob\nsnowflake.password=\nsnowflake.warehouse=COMPUTE_WH_ANALYTICS_2024";
    assert_eq!(scrubbed(text), text);
    for t in [
        "password:\nnext_line_value_Xy12",
        "api_key =\n  aB3dE5gH7jK9mN1pQ3rS5tU7",
        "DB_PASSWORD=\nOTHER=value",
        "Server=x;Password=\nUser=y;",
    ] {
        assert_eq!(scrubbed(t), t, "{t}");
    }
}

#[test]
fn placeholders_the_docs_name_are_kept() {
    for t in [
        "token: ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "export SLACK_TOKEN=xoxb-xxxxxxxxxxxx-xxxxxxxxxxxx-xxxxxxxxxxxxxxxxxxxxxxxx",
        "GITLAB_TOKEN=glpat-XXXXXXXXXXXXXXXXXXXX",
        "aws_access_key_id = AKIAXXXXXXXXXXXXXXXX",
        "api_key = \"<token>\"",
        "password = \"${DB_PASSWORD}\"",
        "secret: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "password = os.environ[\"DB_PASSWORD\"]",
        "sk_live_xxxxxxxxxxxxxxxxxxxxxxxx",
        "Authorization: Bearer <YOUR_TOKEN>",
    ] {
        assert_eq!(kinds_in(t), Vec::<&str>::new(), "{t}");
    }
}

#[test]
fn a_pem_key_written_one_quoted_string_per_line_loses_its_body() {
    let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj";
    let text = format!(
        "key = (\n  \"-----BEGIN PRIVATE KEY-----\\n\"\n  \"{body}\\n\"\n  \"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\\n\"\n  \"-----END PRIVATE KEY-----\\n\"\n)"
    );
    let out = scrubbed(&text);
    assert!(!out.contains(body), "{out}");
    assert!(out.contains("key = ("), "{out}");
}

#[test]
fn keyword_assignments_in_many_syntaxes() {
    let v = "q8Zr2Lm5Xv9Tn3Wk7Bd4";
    for t in [
        "password = \"hunter2-but-long\"".to_string(),
        format!("var apiToken string = \"{v}\""),
        format!("apiToken := `{v}`"),
        format!("$apiToken .= \"{v}\""),
        format!("System.setProperty(\"API_TOKEN\", \"{v}\")"),
        format!("API_TOKEN ::= \"{v}\""),
        format!("API_TOKEN :::= \"{v}\""),
        format!("API_TOKEN ?= \"{v}\""),
        format!("<apiToken>\n    {v}\n</apiToken>"),
        format!("  \"apiToken\" => \"{v}\""),
        format!("string apiToken = \"{v}\";"),
        format!("api_token: '{v}'"),
        format!("{{\n  \"api_token\": \"{v}\"\n}}"),
        format!("[default]\napi_token = {v}"),
    ] {
        assert!(
            !scrubbed(&t).contains(v) && !scrubbed(&t).contains("hunter2"),
            "{t}"
        );
    }
    for t in [
        "password = os.environ['DB_PASSWORD']",
        "password = getpass()",
        "api_key = config.api_key",
        "token = None",
        "password: ${{ secrets.DB_PASSWORD }}",
    ] {
        assert_eq!(kinds_in(t), Vec::<&str>::new(), "{t}");
    }
}

#[test]
fn the_kinds_the_peers_catch() {
    // sample shapes from gitleaks' rule tests (cmd/generate/config/rules/*.go) and the
    // providers' documented formats; values are random, not real credentials
    let cases: &[(&str, &str)] = &[
        ("BUNDLE_ENTERPRISE__CONTRIBSYS__COM=cafebabe:deadbeef", "sidekiq_secret"),
        ("https://cafebabe:deadbeef@gems.contribsys.com/", "sidekiq_sensitive_url"),
        ("pat.AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWx.AbCdEfGhIjKlMnOpQrSt", "harness_api_key"),
        ("dp.pt.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfG", "doppler_token"),
        ("AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF", "age_secret_key"),
        ("mapbox_token = pk.eyJ1IjoiZXhhbXBsZXVzZXIiLCJhIjoiY2xhYmNkZWZnMDAwMDNxcGV4eHh4eHh4eCJ9.AbCdEfGhIjKlMnOpQrStUv", "mapbox_token"),
        ("twitter_bearer = AAAAAAAAAAAAAAAAAAAAAMLheAAAAAAA0%2BuSeid%2BULvsea4JtiGRiSDSJSI%3DEUifiRBkKG5E2XzMDjRfl76ZC9Ub0wnz4XsNiRVBChTYbJcE3F", "twitter_bearer_token"),
        ("ntn_45678901234AbCdEfGhIjKlMnOpQrStUvWxYz012345678", "notion_token"),
        ("sgp_0123456789abcdef_0123456789abcdef0123456789abcdef01234567", "sourcegraph_token"),
        ("https://acme.webhook.office.com/webhookb2/12345678-1234-1234-1234-123456789012@12345678-1234-1234-1234-123456789012/IncomingWebhook/0123456789abcdef0123456789abcdef/12345678-1234-1234-1234-123456789012", "teams_webhook"),
        ("https://user:s3cr3t@example.com/x", "url_password"),
        ("redis://:pw0rd-9Zx@cache.internal:6379/0", "url_password"),
        ("{\"auths\": {\"https://index.docker.io/v1/\": {\"auth\": \"dXNlcjpwYXNzd29yZDEyMw==\"}}}", "docker_config_auth"),
        ("machine api.example.com login bob password Zq8-fr3sh-pa55", "netrc_password"),
        ("# ~/.pgpass\ndb.example.com:5432:appdb:alice:Xk9-pgpa55-word", "pgpass_password"),
        ("xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "slack_app_token"),
        ("client_secret=abc8Q~Ab_cDeFgHiJkLmNoPqRsTuVwXyZ0123456", "azure_ad_client_secret"),
        ("dapi0123456789abcdef0123456789abcdef", "databricks_token"),
        ("dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "digitalocean_token"),
        ("shpat_0123456789abcdefABCDEF0123456789", "shopify_token"),
        ("lin_api_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCd", "linear_api_key"),
        ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIHb\nZXhhbXBsZQ==\nPrivate-Lines: 1\nAAAAIQCvV0ZXhhbXBsZSBwcml2YXRlIGtleSBkYXRhIGhlcmU=\nPrivate-MAC: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "putty_private_key"),
        ("$ANSIBLE_VAULT;1.1;AES256\n62313365396662343061393464336163383764373764613633653634306231386433626436623361\n6134333665353966363534333632666535333761666131620a663537646436643839616531643561", "ansible_vault"),
    ];
    let missed: Vec<_> = cases
        .iter()
        .filter(|(text, kind)| !kinds_in(text).contains(kind))
        .map(|(text, kind)| format!("{kind}: {text} -> {:?}", kinds_in(text)))
        .collect();
    assert!(missed.is_empty(), "{missed:#?}");
}
