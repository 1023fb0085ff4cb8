//! The detection rules, as data: one row per kind. Each row names the literals that must occur
//! (byte-exact, in the raw line) for the rule to be tried, the pattern (the `regex` crate's
//! syntax, linear time, run on a decoded JSON string with Unicode off: `\b`, `\s`, `\w` are
//! ASCII), which capture group is the secret, and the check a match must pass.
//!
//! The shapes are written from the providers' own documentation of their token formats; where
//! each comes from is listed in `docs/scrub.md`. Specific kinds come first: when two rules
//! match the same span the earlier row names it.

/// What a match must also pass to count (see `super::checks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// the shape is enough
    Shape,
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
    /// names: each makes the rule a candidate when followed by one of [`NAME_ENDS`] (so
    /// `token=` and `"token"` are candidates, the frequent `totalTokens` and `tokens` are not)
    pub names: &'static [&'static str],
}

/// What may follow a secret-like name in an assignment, a key or a longer name.
pub const NAME_ENDS: &[&str] = &["\"", "\\\"", "'", "=", ":", " =", " :", "_", "-", "K", "`"];

macro_rules! rule {
    ($kind:expr, [$($lit:expr),* $(,)?], $pat:expr, $group:expr, $check:ident) => {
        rule!($kind, [$($lit),*], $pat, $group, $check, [])
    };
    ($kind:expr, [$($lit:expr),* $(,)?], $pat:expr, $group:expr, $check:ident, [$($ctx:expr),*]) => {
        Rule { kind: $kind, lits: &[$($lit),*], pattern: $pat, group: $group, check: Check::$check, context: &[$($ctx),*], names: &[] }
    };
}

/// Names that make a variable or key secret (used by the assignment rules and by JSON keys).
pub const SECRET_NAME: &str = r"(?i)(?:secret|token|passw(?:or)?d|passphrase|pwd|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?key|signing[_-]?key|encryption[_-]?key|master[_-]?key|credentials?|client[_-]?secret)";

/// The table. Kept to at most 64 rows (a rule set is a `u64` mask).
pub const RULES: &[Rule] = &[
    // --- private keys (PEM, OpenSSH, PGP): the whole block, BEGIN line to END line
    rule!(
        "openssh_private_key",
        ["BEGIN OPENSSH PRIVATE KEY"],
        r"-----BEGIN OPENSSH PRIVATE KEY-----(?:[A-Za-z0-9+/=\s]|\\[rn])*(?:-----END OPENSSH PRIVATE KEY-----)?",
        0,
        Shape
    ),
    rule!(
        "pgp_private_key",
        ["BEGIN PGP PRIVATE KEY BLOCK"],
        r"-----BEGIN PGP PRIVATE KEY BLOCK-----(?:[A-Za-z0-9+/=\s]|\\[rn]|[A-Za-z-]+: [^\r\n\\]*)*(?:-----END PGP PRIVATE KEY BLOCK-----)?",
        0,
        Shape
    ),
    rule!(
        "pem_private_key",
        ["PRIVATE KEY-----"],
        r"-----BEGIN (?:RSA |EC |DSA |ENCRYPTED |ANY )?PRIVATE KEY-----(?:[A-Za-z0-9+/=\s]|\\[rn]|[A-Za-z-]+: [^\r\n\\]*)*(?:-----END (?:RSA |EC |DSA |ENCRYPTED |ANY )?PRIVATE KEY-----)?",
        0,
        Shape
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
        r#"(?i)(?:aws_?)?secret_?access_?key\\?["']?\s*(?:[:=]|=>)\s*\\?["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"#,
        1,
        NotExample
    ),
    rule!(
        "gcp_service_account",
        ["private_key_id"],
        r#"private_key_id\\?"\s*:\s*\\?"([0-9a-f]{40})\\?""#,
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
        r"\bgl(?:pat|dt|ptt|rt|oas|cbt|ft)-[A-Za-z0-9_-]{20,}",
        0,
        Shape
    ),
    rule!(
        "slack_webhook",
        ["hooks.slack.com/"],
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}",
        0,
        Shape
    ),
    rule!(
        "slack_token",
        ["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe"],
        r"\bxox(?:[abprs]|e(?:\.xox[bp])?)-[0-9A-Za-z-]{10,}",
        0,
        Shape
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
        r"\bsk-ant-(?:api|admin|oat|ort)[0-9]{2}-[A-Za-z0-9_-]{32,}",
        0,
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
        r"\bsk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})",
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
    rule!(
        "discord_bot_token",
        ["discord", "Discord", "DISCORD"],
        r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}",
        0,
        Shape
    ),
    rule!(
        "jwt",
        ["eyJ"],
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        0,
        Shape
    ),
    // --- passwords in URLs and connection strings
    rule!(
        "url_password",
        ["://"],
        r#"\b[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/?#@"'<>\\]{1,128}:([^\s/?@"'<>\\]{1,256})@[A-Za-z0-9.\[\]_-]+"#,
        1,
        Password
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
        r#"(?i)(?:^|[;"'\s])(?:password|pwd)\s*=\s*([^;"'\r\n\\]{1,256}?)\s*(?:;|$|["'\\])"#,
        1,
        Password,
        [";"]
    ),
    // --- headers
    rule!(
        "bearer_token",
        ["Bearer ", "bearer ", "BEARER "],
        r"\b(?:Bearer|bearer|BEARER)\s+([A-Za-z0-9._~+/-]{16,}=*)",
        1,
        Random
    ),
    rule!(
        "basic_auth_header",
        ["Basic ", "basic ", "BASIC "],
        r"(?i)authorization\\?[\x22']?\s*[:=]\s*\\?[\x22']?basic\s+([A-Za-z0-9+/]{8,}={0,2})",
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
        pattern: r#"(?i)([A-Za-z0-9_.-]*(?:passw(?:or)?d|passphrase|pwd)[A-Za-z0-9_.-]*)\\?["']?\s*(?:=|:=|:|=>)\s*\\?["']?([^\s"'`;,&<>(){}\[\]$\\]{4,128})(?:$|[\s"'`;,&)\\])"#,
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
        pattern: r#"(?i)([A-Za-z0-9_.-]*(?:secret|token|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?key|credentials?)[A-Za-z0-9_.-]*)\\?["']?\s*(?:=|:=|:|=>)\s*\\?["']?([A-Za-z0-9+/_.~=-]{8,512})"#,
        group: 2,
        check: Check::Random,
        context: &[],
    },
];
