//! The detection rules, as data: one row per kind. Each row names the literals that must occur
//! (byte-exact, in the raw line) for the rule to be tried, the pattern (the `regex` crate's
//! syntax, linear time, run on a decoded JSON string with Unicode off: `\b`, `\s`, `\w` are
//! ASCII), which capture group is the secret, and the check a match must pass.
//!
//! The shapes are written from the providers' own documentation of their token formats and
//! from the peers' rules for the same kinds (gitleaks' default rule set, detect-secrets'
//! plugins); each row's source, an example and what is kept are in `docs/scrub.md`, and each
//! kind has its test (`tests/support/secrets.py`: a generator per kind; `tests.rs`; the peers'
//! own samples in `tests/support/peer_samples.json`). Specific kinds come first: when two rules
//! match the same span the earlier row names it. No pattern crosses a line end between a name
//! and its value.

/// What a match must also pass to count (see `super::checks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// the shape, and not filler, a sequence, low entropy or a documented example
    Shape,
    /// the shape alone (a checksummed or fixed-form shape: the peers' samples of it are filler)
    Exact,
    /// a private-key block with a body (64 or more base64 characters between its lines)
    KeyBlock,
    /// not a documented example value (`...EXAMPLE`, `...EXAMPLEKEY`)
    NotExample,
    /// mixed upper and lower case (Hugging Face tokens)
    MixedCase,
    /// at least one digit (Mailgun's `key-` keys)
    HasDigit,
    /// a value assigned to a secret-named variable: not a placeholder, a path, a number or
    /// a variable reference
    Assigned,
    /// a password: not a placeholder, an identifier of code, or a prose word
    Password,
    /// the password of a URL's userinfo: anything but a placeholder or a variable
    UrlPassword,
    /// a value under a secret-like name in free text: also random-looking (entropy, classes)
    Random,
}

pub struct Rule {
    pub kind: &'static str,
    /// any of these in the raw line makes the rule a candidate for the strings holding it
    pub lits: &'static [&'static str],
    pub pattern: &'static str,
    /// the capture group that is the secret (0: the whole match)
    pub group: usize,
    pub check: Check,
    /// when not empty, the string must also contain one of these
    pub context: &'static [&'static str],
    /// names: each makes the rule a candidate when followed by one of [`NAME_ENDS`]. So `token=`
    /// and `"token"` are candidates, the frequent `totalTokens` and `tokens` are not
    pub names: &'static [&'static str],
}

/// What may follow a secret-like name in an assignment, a key or a longer name.
pub const NAME_ENDS: &[&str] = &[
    "\"", "\\\"", "'", "=", ":", " =", " :", "_", "-", "K", "`", ">", " .", " ?", " ::", " string",
    " String", " str", " []byte",
];

macro_rules! rule {
    ($kind:expr, [$($lit:expr),* $(,)?], $pat:expr, $group:expr, $check:ident) => {
        rule!($kind, [$($lit),*], $pat, $group, $check, [])
    };
    ($kind:expr, [$($lit:expr),* $(,)?], $pat:expr, $group:expr, $check:ident, [$($ctx:expr),*]) => {
        Rule { kind: $kind, lits: &[$($lit),*], pattern: $pat, group: $group, check: Check::$check, context: &[$($ctx),*], names: &[] }
    };
}

/// Between a secret-like name and its value: optional quotes, a type (`var x string =`), then
/// `=`, `:=`, `::=`, `:::=` (Make), `?=`, `.=` (PHP), `+=`, `=>`, `==`, `:`, `,`
/// (`System.setProperty("X", "v")`), or an XML element's `>` (its value may start on the next
/// line); never a line end otherwise, so an empty value does not take the next line.
macro_rules! assign {
    () => {
        r#"(?:\\?["']|[ \t]+[A-Za-z_][A-Za-z0-9_]{0,20})?[ \t]*(?:\\?["'])?[ \t]*(?:==|:::=|::=|:=|\?=|\.=|\+=|=>|=|:|,|>[ \t\r\n]*)[ \t]*(?:\\?["'`])?"#
    };
}

/// Names under a secret-like word that hold no secret. A CSRF token (per page, not a credential), a
/// public token or key, and the name, size, id, file, URL... of a secret (`LLM_SECRET_NAME`,
/// `token_file`, `api_key_id`). Matched against the whole name, any case; the words are those of
/// gitleaks' `generic-api-key` allowlist (cmd/generate/config/rules/generic.go).
pub const BENIGN_NAME: &str = r"(?i)(?:csrf|xsrf|public[_.-]?(?:token|key)|pub[_.-]?key|(?:secret|token|key|passw(?:or)?d|pwd|credentials?|creds)[_.-]?(?:names?|length|len|size|ids?|alias|file(?:name|path)?|path|dir|url|uri|endpoint|type|count|version|ttl|field|label|prefix|header)$)";

/// Values published as public, kept by every rule. Google's example API keys of
/// firebase-android-sdk (the keys gitleaks' `gcp-api-key` allowlist keeps,
/// cmd/generate/config/rules/gcp.go) and the key gitleaks' `generic-api-key` keeps as a public
/// value (yarnpkg/berry#6201).
pub const PUBLIC_VALUES: &[&str] = &[
    "AIzaSyabcdefghijklmnopqrstuvwxyz1234567",
    "AIzaSyAnLA7NfeLquW1tJFpx_eQCxoX-oo6YyIs",
    "AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEM",
    "AIzaSyDMAScliyLx7F0NPDEJi1QmyCgHIAODrlU",
    "AIzaSyD3asb-2pEZVqMkmL6M9N6nHZRR_znhrh0",
    "AIzayDNSXIbFmlXbIE6mCzDLQAqITYefhixbX4A",
    "AIzaSyAdOS2zB6NCsk1pCdZ4-P6GBdi_UUPwX7c",
    "AIzaSyASWm6HmTMdYWpgMnjRBjxcQ9CKctWmLd4",
    "AIzaSyANUvH9H9BsUccjsu2pCmEkOPjjaXeDQgY",
    "AIzaSyA5_iVawFQ8ABuTZNUdcwERLJv_a_p4wtM",
    "AIzaSyA4UrcGxgwQFTfaI3no3t7Lt1sjmdnP5sQ",
    "AIzaSyDSb51JiIcB6OJpwwMicseKRhhrOq1cS7g",
    "AIzaSyBF2RrAIm4a0mO64EShQfqfd2AFnzAvvuU",
    "AIzaSyBcE-OOIbhjyR83gm4r2MFCu4MJmprNXsw",
    "AIzaSyB8qGxt4ec15vitgn44duC5ucxaOi4FmqE",
    "AIzaSyA8vmApnrHNFE0bApF4hoZ11srVL_n0nvY",
    "6fe4476ee5a1832882e326b506d14126",
];

/// Names that make a variable or key secret (used by the assignment rules and by JSON keys).
pub const SECRET_NAME: &str = r"(?i)(?:secret|token|passw(?:or)?d|passphrase|pwd|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|credentials?|client[_-]?secret)";

/// The table. Kept to at most 128 rows (a rule set is a `u128` mask, `super::Mask`).
pub const RULES: &[Rule] = &[
    // --- private keys (PEM, OpenSSH, PGP): the whole block, BEGIN line to END line
    rule!(
        "openssh_private_key",
        ["BEGIN OPENSSH PRIVATE KEY"],
        r"-----BEGIN OPENSSH PRIVATE KEY-----(?:[A-Za-z0-9+/=\s\x22',]|\\[rn])*(?:-----END OPENSSH PRIVATE KEY-----)?",
        0,
        KeyBlock
    ),
    rule!(
        "pgp_private_key",
        ["BEGIN PGP PRIVATE KEY BLOCK"],
        r"-----BEGIN PGP PRIVATE KEY BLOCK-----(?:[A-Za-z0-9+/=\s\x22',]|\\[rn]|[A-Za-z-]+: [^\r\n\\]*)*(?:-----END PGP PRIVATE KEY BLOCK-----)?",
        0,
        KeyBlock
    ),
    rule!(
        "pem_private_key",
        ["PRIVATE KEY-----"],
        r"-----BEGIN (?:RSA |EC |DSA |ENCRYPTED |ANY )?PRIVATE KEY-----(?:[A-Za-z0-9+/=\s\x22',]|\\[rn]|[A-Za-z-]+: [^\r\n\\]*)*(?:-----END (?:RSA |EC |DSA |ENCRYPTED |ANY )?PRIVATE KEY-----)?",
        0,
        KeyBlock
    ),
    // --- cloud
    rule!(
        "aws_access_key_id",
        ["AKIA", "ASIA", "ABIA", "ACCA"],
        r"\b((?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
        1,
        NotExample
    ),
    rule!(
        "aws_secret_access_key",
        [
            "secret_access_key",
            "SECRET_ACCESS_KEY",
            "SecretAccessKey",
            "secretAccessKey",
            "aws_secret",
            "AWS_SECRET"
        ],
        r#"(?i)(?:aws_?)?secret_?access_?key\\?["']?[ \t]*(?:[:=]|=>)[ \t]*\\?["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"#,
        1,
        NotExample
    ),
    rule!(
        "gcp_service_account",
        ["private_key_id"],
        r#"private_key_id\\?"[ \t]*:[ \t]*\\?"([0-9a-f]{40})\\?""#,
        1,
        Shape
    ),
    rule!(
        "google_api_key",
        ["AIza"],
        r"\b(AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)",
        1,
        Shape
    ),
    rule!(
        "google_oauth_client_secret",
        ["GOCSPX-"],
        r"\bGOCSPX-[A-Za-z0-9_-]{28}",
        0,
        Shape
    ),
    rule!(
        "google_oauth_token",
        ["ya29."],
        r"\bya29\.[0-9A-Za-z_-]{20,}",
        0,
        Shape
    ),
    rule!(
        "azure_storage_key",
        ["AccountKey="],
        r"AccountKey=([A-Za-z0-9+/]{86}==)",
        1,
        Shape
    ),
    rule!(
        "azure_sas_token",
        ["sig="],
        r"[?&]sig=([A-Za-z0-9%+/]{40,120}(?:%3D|%3d|=){0,2})",
        1,
        Shape,
        ["sv=", "sv%3D"]
    ),
    // --- code hosts, chat, payments, AI providers, package registries
    rule!(
        "github_token",
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        r"\bgh[pousr]_[A-Za-z0-9]{36,251}\b",
        0,
        Shape
    ),
    rule!(
        "github_fine_grained_pat",
        ["github_pat_"],
        r"\bgithub_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}\b",
        0,
        Shape
    ),
    rule!(
        "gitlab_token",
        ["glpat-", "gldt-", "glptt-", "glrt-", "gloas-", "glcbt-", "glft-"],
        r"(\bgl(?:pat|dt|rt|cbt|ft)-[A-Za-z0-9_-]{20,}|\bglptt-[A-Za-z0-9_-]{40}|\bgloas-[A-Za-z0-9_-]{64})(?:[^A-Za-z0-9_-]|$)",
        1,
        Shape
    ),
    rule!(
        "slack_webhook",
        ["hooks.slack.com/"],
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]{20,}",
        0,
        Shape
    ),
    rule!(
        "slack_token",
        ["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe"],
        r"\bxox(?:[bp]-[0-9]{8,13}-[0-9A-Za-z-]{8,}|(?:[ars]|e(?:\.xox[bp])?)-[0-9A-Za-z-]{10,})",
        0,
        HasDigit
    ),
    rule!(
        "stripe_secret_key",
        ["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
        r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{24,247}\b",
        0,
        Shape
    ),
    rule!(
        "stripe_webhook_secret",
        ["whsec_"],
        r"\bwhsec_[A-Za-z0-9+/=]{32,}",
        0,
        Shape
    ),
    rule!(
        "anthropic_api_key",
        ["sk-ant-"],
        r"\b(sk-ant-(?:api|admin|oat|ort)[0-9]{2}-[A-Za-z0-9_-]{78,118}AA)(?:[^A-Za-z0-9_-]|$)",
        1,
        Shape
    ),
    rule!(
        "openai_api_key",
        [
            "sk-proj-",
            "sk-svcacct-",
            "sk-admin-",
            "sk-None-",
            "T3BlbkFJ"
        ],
        r"\bsk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{8,}T3BlbkFJ[A-Za-z0-9_-]{8,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})",
        0,
        Shape
    ),
    rule!("npm_token", ["npm_"], r"\bnpm_[A-Za-z0-9]{36}\b", 0, Shape),
    rule!(
        "pypi_token",
        ["pypi-AgE"],
        r"\bpypi-AgE[A-Za-z0-9_-]{50,}",
        0,
        Shape
    ),
    rule!(
        "huggingface_token",
        ["hf_", "api_org_"],
        r"\b(?:hf_[A-Za-z0-9]{34,40}|api_org_[A-Za-z0-9]{34})\b",
        0,
        MixedCase
    ),
    rule!(
        "sendgrid_api_key",
        ["SG."],
        r"\b(SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})(?:[^A-Za-z0-9_-]|$)",
        1,
        Shape
    ),
    rule!(
        "twilio_api_key",
        ["SK"],
        r"\bSK[0-9a-fA-F]{32}\b",
        0,
        HasDigit
    ),
    rule!(
        "mailgun_api_key",
        ["key-"],
        r"\bkey-[0-9a-z]{32}\b",
        0,
        HasDigit
    ),
    rule!(
        "mailchimp_api_key",
        ["-us0", "-us1", "-us2", "-us3", "-us4", "-us5", "-us6", "-us7", "-us8", "-us9"],
        r"\b([0-9a-f]{32}-us[0-9]{1,2})(?:[^A-Za-z0-9_-]|$)",
        1,
        HasDigit
    ),
    rule!(
        "telegram_bot_token",
        [":AA"],
        r"\b([0-9]{8,10}:AA[A-Za-z0-9_-]{33})(?:[^A-Za-z0-9_-]|$)",
        1,
        Shape
    ),
    rule!(
        "discord_webhook",
        ["discord.com/api/webhooks/", "discordapp.com/api/webhooks/"],
        r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60,80}",
        0,
        Shape
    ),
    // a bot token has no literal (its first part is the base64 of a numeric id): the rule is a
    // candidate wherever two dots stand 7 bytes apart with 6 token bytes between them
    // (`super::DOTTED_SIX`), the token's middle part
    rule!(
        "discord_bot_token",
        [],
        r"([MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38})(?:[^A-Za-z0-9_-]|$)",
        1,
        Shape
    ),
    rule!(
        "jwt",
        ["eyJ"],
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?",
        0,
        Shape
    ),
    // --- prefixed tokens and provider shapes. Source of each kind: gitleaks' default rule of
    // the same provider (config/gitleaks.toml; its test samples in cmd/generate/config/rules/)
    // or detect-secrets' plugin, checked against the provider's documented format; the
    // patterns are ours (linear, no look-around).
    rule!(
        "age_secret_key",
        ["AGE-SECRET-KEY-1"],
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        0,
        Exact
    ),
    rule!(
        "putty_private_key",
        ["Private-Lines:"],
        r"Private-Lines:[ \t]*[0-9]+[ \t]*(?:\r?\n|\\r?\\n)(?:[ \t]*[A-Za-z0-9+/=]+[ \t]*(?:\r?\n|\\r?\\n))*[ \t]*(?:Private-(?:MAC|Hash):[ \t]*[0-9A-Fa-f]+|[A-Za-z0-9+/=]+)",
        0,
        Shape
    ),
    rule!(
        "ansible_vault",
        ["$ANSIBLE_VAULT;"],
        r"\$ANSIBLE_VAULT;[0-9.]+;[A-Z0-9]+(?:;[A-Za-z0-9_.-]+)?(?:[ \t]*(?:\r?\n|\\r?\\n)[ \t]*[0-9a-fA-F]+)+",
        0,
        Shape
    ),
    rule!(
        "onepassword_token",
        ["A3-", "ops_eyJ"],
        r"\bA3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}\b|\bops_eyJ[A-Za-z0-9+/]{250,}={0,3}",
        0,
        Shape
    ),
    rule!(
        "aws_bedrock_api_key",
        ["ABSK", "bedrock-api-key-"],
        r"\bABSK[A-Za-z0-9+/]{109,269}={0,2}|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%_-]*",
        0,
        Shape
    ),
    rule!(
        "alibaba_access_key_id",
        ["LTAI"],
        r"\bLTAI[A-Za-z0-9]{20}\b",
        0,
        HasDigit
    ),
    rule!(
        "azure_ad_client_secret",
        ["Q~"],
        r"(?:^|[^A-Za-z0-9_~.-])([A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})(?:[^A-Za-z0-9_~.-]|$)",
        1,
        Shape
    ),
    rule!(
        "teams_webhook",
        ["webhook.office.com", "logic.azure.com"],
        r"https://[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/-]{60,}|https://[A-Za-z0-9.-]+\.logic\.azure\.com(?::443)?/workflows/[A-Za-z0-9]+/triggers/[^\s\x22'<>]*sig=[A-Za-z0-9_%-]{20,}",
        0,
        Shape
    ),
    rule!(
        "databricks_token",
        ["dapi"],
        r"\bdapi[a-f0-9]{32}(?:-[0-9])?\b",
        0,
        Shape
    ),
    rule!(
        "digitalocean_token",
        ["dop_v1_", "doo_v1_", "dor_v1_"],
        r"\bdo[por]_v1_[a-f0-9]{64}\b",
        0,
        Shape
    ),
    rule!(
        "shopify_token",
        ["shpat_", "shpca_", "shppa_", "shpss_"],
        r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
        0,
        Shape
    ),
    rule!(
        "linear_api_key",
        ["lin_api_"],
        r"\blin_api_[A-Za-z0-9]{40}\b",
        0,
        Shape
    ),
    rule!(
        "notion_token",
        ["ntn_"],
        r"\bntn_[0-9]{11}[A-Za-z0-9]{35}\b",
        0,
        Shape
    ),
    rule!(
        "sourcegraph_token",
        ["sgp_", "sourcegraph", "Sourcegraph", "SOURCEGRAPH"],
        concat!(
            r"\b(sgp_(?:(?:[a-fA-F0-9]{16}|local)_)?[a-fA-F0-9]{40})\b|(?i:sourcegraph)[A-Za-z0-9_.-]*",
            assign!(),
            r"([a-fA-F0-9]{40})\b"
        ),
        1,
        Shape
    ),
    rule!(
        "harness_api_key",
        ["pat.", "sat."],
        r"\b(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}\b",
        0,
        Shape
    ),
    rule!(
        "doppler_token",
        [
            "dp.pt.",
            "dp.st.",
            "dp.sa.",
            "dp.ct.",
            "dp.scim.",
            "dp.audit."
        ],
        r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}\b",
        0,
        Shape
    ),
    rule!(
        "mapbox_token",
        ["pk.", "sk.", "tk."],
        r"\b[pst]k\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}|\b[ps]k\.[A-Za-z0-9]{60}\.[A-Za-z0-9]{22}\b",
        0,
        Shape
    ),
    rule!(
        "twitter_bearer_token",
        ["AAAAAAAAAAAAAAAAAAAA"],
        r"\bA{20,24}[A-Za-z0-9%]{70,110}",
        0,
        Shape
    ),
    rule!(
        "slack_app_token",
        ["xapp-"],
        r"\bxapp-[0-9]-[A-Z0-9]+-[0-9]+-[A-Za-z0-9]+",
        0,
        Shape
    ),
    rule!(
        "sidekiq_secret",
        ["CONTRIBSYS__COM", "contribsys__com"],
        concat!(
            r"(?i)BUNDLE_(?:ENTERPRISE|GEMS)__CONTRIBSYS__COM[A-Za-z0-9_.-]*",
            assign!(),
            r"([a-f0-9]{8}:[a-f0-9]{8})\b"
        ),
        1,
        Shape
    ),
    rule!(
        "sidekiq_sensitive_url",
        ["contribsys.com"],
        r"(?i)\bhttps?://([a-f0-9]{8}:[a-f0-9]{8})@(?:gems|enterprise)\.contribsys\.com",
        1,
        Shape
    ),
    rule!(
        "docker_config_auth",
        ["\"auth\"", "\\\"auth\\\""],
        r#""auth"[ \t]*:[ \t]*"([A-Za-z0-9+/]{6,}={0,2})""#,
        1,
        Shape
    ),
    rule!(
        "netrc_password",
        ["machine "],
        r"(?:^|[ \t\r\n])password[ \t]+([^\s]{1,256})",
        1,
        UrlPassword,
        ["login"]
    ),
    rule!(
        "pgpass_password",
        ["pgpass", ":5432:", "PGPASS"],
        r"(?m)^[ \t]*[A-Za-z0-9.*_-]+:(?:[0-9]+|\*):[^:\s]+:[^:\s]+:([^\s]{1,256})[ \t]*$",
        1,
        UrlPassword
    ),
    rule!(
        "grafana_token",
        ["eyJrIjoi", "glc_", "glsa_"],
        r"\beyJrIjoi[A-Za-z0-9]{70,400}={0,3}|\bglc_[A-Za-z0-9+/]{32,400}={0,3}|\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b",
        0,
        Shape
    ),
    rule!(
        "vault_token",
        ["hvs.", "hvb.", "hvr."],
        r"\bhv[sbr]\.[A-Za-z0-9_-]{90,300}",
        0,
        Shape
    ),
    rule!(
        "terraform_cloud_token",
        [".atlasv1."],
        r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
        0,
        Shape
    ),
    rule!(
        "heroku_api_key",
        ["HRKU-"],
        r"\bHRKU-(?:AA)?[A-Za-z0-9_-]{58,60}",
        0,
        Shape
    ),
    rule!(
        "sentry_token",
        ["sntryu_", "sntrys_"],
        r"\bsntryu_[a-f0-9]{64}\b|\bsntrys_eyJ[A-Za-z0-9+/=_]{60,500}",
        0,
        Shape
    ),
    rule!(
        "planetscale_token",
        ["pscale_"],
        r"\bpscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}",
        0,
        Shape
    ),
    rule!(
        "new_relic_key",
        ["NRAK-", "NRJS-", "NRII-"],
        r"\bNR(?:AK-[A-Z0-9]{27}|JS-[a-f0-9]{19}|II-[A-Za-z0-9-]{32})\b",
        0,
        Shape
    ),
    rule!(
        "flyio_token",
        ["fo1_", "fm1a_", "fm1r_", "fm2_"],
        r"\b(?:fo1_[A-Za-z0-9_-]{43}|fm1[ar]_[A-Za-z0-9+/]{100,}={0,3}|fm2_[A-Za-z0-9+/]{100,}={0,3})",
        0,
        Shape
    ),
    rule!(
        "gitlab_other_token",
        [
            "glsoat-",
            "glffct-",
            "glimt-",
            "glagent-",
            "GR1348941",
            "_gitlab_session=",
            "gltst-"
        ],
        r"\bgl(?:soat|ffct|tst)-[A-Za-z0-9_-]{20,}|\bglimt-[A-Za-z0-9_-]{25}|\bglagent-[A-Za-z0-9_-]{50}|\bGR1348941[A-Za-z0-9_-]{20}|_gitlab_session=[0-9a-z]{32}",
        0,
        Shape
    ),
    rule!(
        "square_token",
        ["sq0atp-", "sq0csp-", "EAAA"],
        r"\b(?:sq0atp-[A-Za-z0-9_-]{22,60}|sq0csp-[A-Za-z0-9_-]{43}|EAAA[A-Za-z0-9_-]{60})\b",
        0,
        HasDigit
    ),
    rule!(
        "sumologic_access_id",
        ["sumo", "Sumo", "SUMO"],
        concat!(
            r"(?i:sumo)[A-Za-z0-9_.-]*",
            assign!(),
            r"(su[A-Za-z0-9]{12})\b"
        ),
        1,
        MixedCase
    ),
    rule!(
        "facebook_page_token",
        ["EAAM", "EAAC"],
        r"\bEAA[MC][A-Za-z0-9]{100,}",
        0,
        Shape
    ),
    rule!(
        "prefixed_api_token",
        [
            "pplx-",
            "pnu_",
            "pul-",
            "rdme_",
            "rubygems_",
            "tk-us-",
            "xkeysib-",
            "shippo_",
            "sm_aat_",
            "sm_pat_",
            "sm_sat_",
            "ico-",
            "PMAK-",
            "fio-u-",
            "dt0c01.",
            "EZAK",
            "EZTK",
            "duffel_",
            "CLOJARS_",
            "p8e-",
            "AKCp",
            "cmVmd",
            "ATATT3",
            "4b1d",
            "_mmk",
            "v1.0-",
            "FLWSECK",
            "FLWPUBK",
            "s-s4t2",
            "sha256~",
            "gsk_",
            "lsv2_",
            "dnkey-",
            "tfp_",
            "API-",
            "rk_prod_",
            "sk_prod_"
        ],
        r"(?:^|[^A-Za-z0-9._/~-])((?:pplx-[A-Za-z0-9]{48}|pnu_[A-Za-z0-9]{36}|pul-[a-f0-9]{40}|rdme_[a-z0-9]{70}|rubygems_[a-f0-9]{48}|tk-us-[A-Za-z0-9_-]{48}|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}|shippo_(?:live|test)_[a-fA-F0-9]{40}|sm_[aps]at_[A-Za-z0-9]{16}|ico-[A-Za-z0-9]{32}|PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}|fio-u-[A-Za-z0-9_=-]{64}|dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}|EZ[AT]K[A-Za-z0-9]{54}|duffel_(?:test|live)_[A-Za-z0-9_=-]{43}|CLOJARS_[A-Za-z0-9]{60}|p8e-[A-Za-z0-9]{32}|AKCp[A-Za-z0-9]{69}|cmVmd[A-Za-z0-9]{59}|ATATT3[A-Za-z0-9_=-]{186}|4b1d[A-Za-z0-9]{38}|[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk|v1\.0-[a-f0-9]{24}-[a-f0-9]{146}|FLWSECK_TEST-[A-Ha-h0-9]{12}|FLW(?:SEC|PUB)K_TEST-[A-Ha-h0-9]{32}-X|s-s4t2(?:ud|af)-[A-Fa-f0-9]{64}|sha256~[A-Za-z0-9_-]{43}|gsk_[A-Za-z0-9]{52}|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}|dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}|tfp_[A-Za-z0-9_.=-]{59}|API-[A-Z0-9]{26}|(?:sk|rk)_prod_[A-Za-z0-9]{10,99}))(?:\b|$)",
        1,
        HasDigit
    ),
    rule!(
        "curl_auth_user",
        ["curl "],
        r#"\bcurl\b(?:[^\r\n]|\\\r?\n)*?[ \t](?:-u|--user)(?:=|[ \t]+)["']?[^\s"':]*["']?:["']?\{?([^\s"'<>{}]{3,256})"#,
        1,
        Password
    ),
    rule!(
        "authorization_header",
        ["Authorization", "authorization", "AUTHORIZATION"],
        r#"(?i)\bauthorization\\?["']?[ \t]*[:=][ \t]*\\?["']?(?:(?:token|api-token|apikey|api-key|key|bot|ssws|sso-key|digest)[ \t]+)?([A-Za-z0-9._~+/=:-]{16,})"#,
        1,
        Random
    ),
    rule!(
        "facebook_access_token",
        ["facebook", "Facebook", "FACEBOOK"],
        r"\b([0-9]{15,16}(?:\||%7C)[0-9A-Za-z_-]{27,40})",
        1,
        Shape
    ),
    // --- passwords in URLs and connection strings
    rule!(
        "url_password",
        ["://"],
        r#"\b[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/?#@"'<>\\\[\]]{0,128}:([^\s/?@"'<>\\]{1,256})@[A-Za-z0-9.\[\]_-]+"#,
        1,
        UrlPassword
    ),
    rule!(
        "connection_string_password",
        [
            "Password=",
            "password=",
            "PASSWORD=",
            "Pwd=",
            "pwd=",
            "PWD="
        ],
        r#"(?i)(?:^|[;"'\s])(?:password|pwd)[ \t]*=[ \t]*([^;"'\r\n\\]{1,256}?)[ \t]*(?:;|$|["'\\\r\n])"#,
        1,
        Password,
        [";"]
    ),
    // --- headers
    rule!(
        "bearer_token",
        ["Bearer ", "bearer ", "BEARER "],
        r"\b(?:Bearer|bearer|BEARER)[ \t]+([A-Za-z0-9._~+/-]{16,}=*)",
        1,
        Random
    ),
    rule!(
        "basic_auth_header",
        ["Basic ", "basic ", "BASIC "],
        r"(?i)authorization\\?[\x22']?[ \t]*[:=][ \t]*\\?[\x22']?basic[ \t]+([A-Za-z0-9+/]{8,}={0,2})",
        1,
        Shape
    ),
    // --- assignments to secret-named variables (.env files, `export`, shell, YAML, code)
    rule!(
        "env_secret_assignment",
        [
            "SECRET",
            "TOKEN",
            "PASSWORD",
            "PASSWD",
            "PASS=",
            "PWD=",
            "API_KEY",
            "APIKEY",
            "ACCESS_KEY",
            "PRIVATE_KEY",
            "_KEY=",
            "CREDENTIAL",
            "AUTH"
        ],
        r#"(?:^|\bexport\s+|\bset\s+|[\s;&|(])([A-Z][A-Z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|PASS|PWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|_KEY|CREDENTIALS?|AUTH)[A-Z0-9_]*)=(?:"|')?([^\s"'`;&|]{6,})"#,
        2,
        Assigned
    ),
    Rule {
        kind: "password_assignment",
        lits: &[],
        names: &[
            "password",
            "Password",
            "PASSWORD",
            "passwd",
            "PASSWD",
            "Passwd",
            "passphrase",
            "Passphrase",
            "pwd",
            "PWD",
            "Pwd",
        ],
        pattern: concat!(
            r#"(?i)([A-Za-z0-9_.-]*(?:passw(?:or)?d|passphrase|pwd|contrase(?:\xC3\xB1|n)a|(?:db|database|key)_?pass)[A-Za-z0-9_.-]*)"#,
            assign!(),
            r#"([^\s"'`;,&<>(){}\[\]$\\]{4,128})(?:$|[\s"'`;,&)\\<])"#
        ),
        group: 2,
        check: Check::Password,
        context: &[],
    },
    Rule {
        kind: "secret_keyed_value",
        lits: &[],
        names: &[
            "secret",
            "Secret",
            "SECRET",
            "token",
            "Token",
            "TOKEN",
            "api_key",
            "API_KEY",
            "apiKey",
            "ApiKey",
            "apikey",
            "APIKEY",
            "api-key",
            "Api-Key",
            "API-KEY",
            "access_key",
            "accessKey",
            "AccessKey",
            "private_key",
            "privateKey",
            "PrivateKey",
            "credential",
            "Credential",
            "CREDENTIAL",
            "credentials",
            "Credentials",
            "CREDENTIALS",
            "secrets",
            "tokens\"",
            "auth_key",
            "authKey",
        ],
        pattern: concat!(
            r#"(?i)([A-Za-z0-9_.-]*(?:secret|token|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?key|(?:service|account|db|database|priv|client|signing|encryption|master)[_-]?key|credentials?|creds)[A-Za-z0-9_.-]*)"#,
            assign!(),
            r#"([A-Za-z0-9+/_.~=-]{8,512})"#
        ),
        group: 2,
        check: Check::Random,
        context: &[],
    },
];
