//! The peers' look-alikes that are kept, and the shapes a peer catches that the rules must too.
//! Samples from gitleaks' rule tests (cmd/generate/config/rules/<provider>.go, their `fps` and
//! `tps`); values are made up or documented public values, never real credentials.
use super::*;

fn kinds_in(text: &str) -> Vec<&'static str> {
    let line = serde_json::json!({"type":"message","id":"a1","parentId":null,
        "message":{"role":"user","content":text}})
    .to_string();
    let (_, f) = scrub_bytes(line.as_bytes(), Options::default());
    f.iter().map(|f| f.kind).collect()
}

fn assert_kept(cases: &[&str]) {
    let flagged: Vec<_> = cases
        .iter()
        .filter(|t| !kinds_in(t).is_empty())
        .map(|t| format!("{t} -> {:?}", kinds_in(t)))
        .collect();
    assert!(flagged.is_empty(), "{flagged:#?}");
}

fn assert_found(cases: &[(&str, &str)]) {
    let missed: Vec<_> = cases
        .iter()
        .filter(|(t, k)| !kinds_in(t).contains(k))
        .map(|(t, k)| format!("{k}: {t} -> {:?}", kinds_in(t)))
        .collect();
    assert!(missed.is_empty(), "{missed:#?}");
}

#[test]
fn filler_of_one_character_or_a_short_period_is_kept() {
    // sentry.go, grafana.go, gitlab.go (rrt), gcp.go, sourcegraph.go fps
    assert_kept(&[
        "sntryu_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "   API_KEY=\"glc_111111111111111111111111111111111111111111=\"",
        "GR134894112312312312312312312",
        "sgp_5555555dAAAAA7777777CcccCFaaaaaaaaaaaaaa",
        "apiKey: \"AIzaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
    ]);
    // random values of the same shapes still go
    assert_found(&[
        (
            "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",
            "sentry_token",
        ),
        ("GR1348941aZ3xK9pQ2mW7vT4rY8nB1c", "gitlab_other_token"),
        (
            "sgp_3f1c0a9b8e7d6c5b4a39281706f5e4d3c2b1a0f9",
            "sourcegraph_token",
        ),
        ("AIzaSyQ3x9K2mW7vT4rY8nB1cD5eF6gH0jL2pR4", "google_api_key"),
    ]);
}

#[test]
fn the_documented_public_google_api_keys_are_kept() {
    // firebase-android-sdk's published example keys (gcp.go's allowlist and fps)
    assert_kept(&[
        "AIzaSyabcdefghijklmnopqrstuvwxyz1234567",
        "AIzaSyAnLA7NfeLquW1tJFpx_eQCxoX-oo6YyIs",
        "AIzayDNSXIbFmlXbIE6mCzDLQAqITYefhixbX4A",
        "AIzaSyA8vmApnrHNFE0bApF4hoZ11srVL_n0nvY",
        "key = \"AIzaSyBcE-OOIbhjyR83gm4r2MFCu4MJmprNXsw\"",
    ]);
}

#[test]
fn anthropic_keys_have_their_documented_shape() {
    // anthropic.go fps: too short a body, or not ending in `AA`
    assert_kept(&[
        "sk-ant-admin01-abc123xyz-456de-klMnopqrstuvwx-3456yza789bcde-1234fghijklmnopAA",
        "sk-ant-api03-abc123xyz-456de-klMnopqrstuvwx-3456yza789bcde-1234fghijklmnopAA",
        "sk-ant-api03-abc123xyz-456def789ghij-klmnopqrstuvwx-3456yza789bcde-1234fghijklmnopby56aaaogaopaaaabc123xyzBB",
    ]);
    let body = "Xq3-Zr8_Lm5Vv9Tn3Wk7Bd4Hy6Jp2Fs1Gc0Qa8Re5Tu7Io9Pl3Km2Nj4Bh6Vg8Cf1Dx3Sz5Aw7Ey9Ru2Ti4Yo6Up8Iq0Op1";
    let key = format!("sk-ant-api03-{}AA", &body[..93]);
    assert_found(&[(key.as_str(), "anthropic_api_key")]);
}

#[test]
fn slack_bot_and_user_tokens_carry_a_workspace_id() {
    // slack.go fps: ids too short, or the value masked with `#`
    assert_kept(&[
        "xoxb-12345-abcd234",
        "\"token3\": \"xoxp-1234-1234-1234-4ddbc191d40ee098cbaae6f3523ada2d\"",
        "\"token4\": \"xoxp-572370529330-573807301142-572331691188-####################\"",
    ]);
    assert_found(&[
        (
            "xoxb-263594206564-2343594206574-FGqddMF8t08v8N7Oq4i57vs1",
            "slack_token",
        ),
        (
            "xoxp-41684372915-1320496754-45609968301-e708ba56e1517a99f6b5fb07349476ef",
            "slack_token",
        ),
    ]);
}

#[test]
fn a_legacy_sourcegraph_token_goes_only_under_a_sourcegraph_name() {
    assert_found(&[
        (
            "sourcegraph: 6d2FabeB6ADd229Bc199FabA28fD3efb57dF0bD3",
            "sourcegraph_token",
        ),
        (
            "SOURCEGRAPH_ACCESS_TOKEN = \"6d2fabeb6add229bc199faba28fd3efb57df0bd3\"",
            "sourcegraph_token",
        ),
    ]);
    // sourcegraph.go fps: 40 hex alone (a git SHA looks the same)
    assert_kept(&[
        "BcAeb6640ad7DAD46AD73687946Ce85047d5C9Bb",
        "commit 6d2fabeb6add229bc199faba28fd3efb57df0bd3",
    ]);
}

#[test]
fn names_that_hold_no_secret_are_kept() {
    // generic.go fps: the name of a secret, a public token, a CSRF token, Maven coordinates
    assert_kept(&[
        "LLM_SECRET_NAME = \"NEXUS-GPT4-API-KEY\"",
        "publicToken = \"9Cnzj4p4WGeKLs1Pt8QuKUpRKfFLfRYC9AIKjbJTWit\"",
        "csrf-token=Mj2qykJO5rELyHgezQ69nzUX0i3OH67V7+V4eUrLfpuyOuxmiW9rhROG/Whikle15syazJOkrjJa3U2AbhIvUw==",
        "notes            = \"Maven - io.jsonwebtoken:jjwt-jackson-0.11.2\"",
        "{\"publicToken\": \"9Cnzj4p4WGeKLs1Pt8QuKUpRKfFLfRYC9AIKjbJTWit\"}",
        "token_file: a8Kd93Lq2Zx7Vb4Nm1",
    ]);
    assert_found(&[
        (
            "myToken = \"9Cnzj4p4WGeKLs1Pt8QuKUpRKfFLfRYC9AIKjbJTWit\"",
            "secret_keyed_value",
        ),
        (
            "{\"apiToken\": \"9Cnzj4p4WGeKLs1Pt8QuKUpRKfFLfRYC9AIKjbJTWit\"}",
            "secret_keyed_value",
        ),
        ("SECRET_NAME_KEY=Zq8fr3shPa55w0rdX", "env_secret_assignment"),
    ]);
}

#[test]
fn curl_user_and_password_each_quoted() {
    // curl.go tps: `--user "user":"password"` with braces kept by the shell
    assert_found(&[(
        "curl -X POST --user \"{acd3c08b-74e8-4f44-a2d0-80694le24f46}\":\"{ZqL5kVrX1n8tA2}\" https://gateway.example.net/api",
        "curl_auth_user",
    )]);
    assert_kept(&[
        "curl -u \"{user}\":\"{password}\" https://example.com",
        "curl --user user:{token} https://example.com",
    ]);
}

#[test]
fn detect_secrets_samples_of_its_plugin_tests() {
    // detect-secrets tests/plugins/{mailchimp_key,jwt,discord,gitlab_token}_test.py
    assert_found(&[
        ("343ea45721923ed956e2b38c31db76aa-us30", "mailchimp_api_key"),
        ("a2937653ed38c31a43ea46e2b19257db-us2", "mailchimp_api_key"),
        (
            "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJuYW1lIjoiSm9lIiwKInN0YXR1cyI6ImVtcGxveWVlIgp9",
            "jwt",
        ),
        (
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ",
            "jwt",
        ),
        (
            "DISCORD_TOKEN: MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
            "discord_bot_token",
        ),
        (
            "glptt-Need5_T00-be-exactly-40-chars--ELse_fail",
            "gitlab_token",
        ),
        (
            "gloas-checking_Length-Is-_exactly_64--checking_Length-Is-_exactly_64--",
            "gitlab_token",
        ),
    ]);
    assert_kept(&[
        "0123456789abcdef0123456789abcdef-us-east-1",
        "discord: MZ1yGvKTj0rY0cV8i47CjAa.uHQPq.Xb1Mk2nEhe-4icrGOuegj57zMC",
        "discord: PZ1yGvKTjE0rY0cV8i47CjAa.uRHQPq.Xb1Mk2nEhe-4iUcrGOuegj57zMC",
        "glptt-Need5_T00-be-exactly-40-chars--ELse_failing",
        "glptt-hellOworld380_testin",
        "gloas-checking_Length-Is-checking_Length-Is-",
        "gloas-checking_Length-Is-_exactly_64--Xchecking_Length-Is-_longer_longer",
    ]);
}

#[test]
fn a_bare_discord_bot_token_is_found_and_its_look_alikes_kept() {
    // detect-secrets tests/plugins/discord_test.py: every true positive written alone (no word
    // `discord` near it), and every false positive
    assert_found(&[
        (
            "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
            "discord_bot_token",
        ),
        (
            "Nzk5MjgxNDk0NDc2NDU1OTg3.YABS5g.2lmzECVlZv3vv6miVnUaKPQi2wI",
            "discord_bot_token",
        ),
        (
            "MZ1yGvKTjE0rY0cV8i47CjAa.uRHQPq.Xb1Mk2nEhe-4iUcrGOuegj57zMC",
            "discord_bot_token",
        ),
        (
            "OTUyNED5MDk2MTMxNzc2MkEz.YjESug.UNf-1GhsIG8zWT409q2C7Bh_zWQ",
            "discord_bot_token",
        ),
        (
            "OTUyNED5MDk2MTMxNzc2MkEz.GSroKE.g2MTwve8OnUAAByz8KV_ZTV1Ipzg4o_NmQWUMs",
            "discord_bot_token",
        ),
        (
            "MTAyOTQ4MTN5OTU5MTDwMEcxNg.GSwJyi.sbaw8msOR3Wi6vPUzeIWy_P0vJbB0UuRVjH8l8",
            "discord_bot_token",
        ),
        (
            "ATMyOTQ4MTN5OTU5MTDwMEcxNg.GSwJyi.sbaw8msOR3Wi6vPUzeIWy_P0vJbB0UuRVjH8l8",
            "discord_bot_token",
        ),
        (
            "=MTAyOTQ4MTN5OTU5MTDwMEcxN.GSwJyi.sbaw8msOR3Wi6vPUzeIWy_P0vJbB0UuRVjH8l8",
            "discord_bot_token",
        ),
        (
            "MTAyOTQ4MTN5OTU5MTDwMEcxNg.YjESug.UNf-1GhsIG8zWT409q2C7Bh_zWQ!4o_NmQWUMs",
            "discord_bot_token",
        ),
        (
            "bot = Client(token='MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs')",
            "discord_bot_token",
        ),
    ]);
    assert_kept(&[
        "MZ1yGvKTj0rY0cV8i47CjAa.uHQPq.Xb1Mk2nEhe-4icrGOuegj57zMC",
        "MZ1yGvKTj0rY0cV8i47CjAa.uRHQPq.Xb1Mk2nEhe-4iUcrGOuegj57zMC",
        "MZ1yGvKTjE0rY0cV8i47CjAa.uHQPq.Xb1Mk2nEhe-4iUcrGOuegj57zMC",
        "MZ1yGvKTjE0rY0cV8i47CjAa.uRHQPq.Xb1Mk2nEhe-4iUcrGOuegj57zM",
        "MZ1yGvKTjE0rY0cV8i47CjAa.uRHQPq.Xb1Mk2nEhe,4iUcrGOuegj57zMC",
        "PZ1yGvKTjE0rY0cV8i47CjAa.uRHQPq.Xb1Mk2nEhe-4iUcrGOuegj57zMC",
        "MTAyOTQ4MTN5OTU5MTDwMEcxNg0.GSwJyi.sbaw8msOR3Wi6vPUzeIWy_P0vJbB0UuRVjH8l8",
        // dotted names and versions of the same rhythm that are not tokens
        "see sessiontree.scrub.rules.Discord and com.example.widget.render.module",
        "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWsTooLongForTheHmac",
    ]);
}

#[test]
fn an_openai_key_needs_its_marker() {
    // detect-secrets tests/plugins/openai_test.py: the project key with `T3BlbkFJ` (base64 of
    // `OpenAI`, in every OpenAI key format) goes, the one with the marker changed is kept
    assert_found(&[
        (
            "sk-proj-Xi8tdMjHV6pmbBbwilTeT3BlbkFJ3UDnpdEwNNm6wVBpYM0o",
            "openai_api_key",
        ),
        (
            "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",
            "openai_api_key",
        ),
    ]);
    assert_kept(&["sk-proj-Xi8tdMjHV6pmbBbwilTeT4BlbkFJ3UDnpdEwNNm6wVBpYM0o"]);
}

#[test]
fn two_words_under_a_password_name_are_a_name() {
    // detect-secrets tests/plugins/ibm_cloud_iam_test.py (a false positive)
    assert_kept(&["ibm-cloud-pwd = shorter-version", "db_password: read_only"]);
    assert_found(&[
        ("ibm-cloud-pwd = shorter-version-2", "password_assignment"),
        (
            "password = correct-horse-battery-staple",
            "password_assignment",
        ),
        ("password = \"hunter2-but-long\"", "password_assignment"),
    ]);
}
