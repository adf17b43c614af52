"""Where an s3:// store's settings come from: environment over config file, never the URL or spec."""

from pathlib import Path

import pytest

from ccsweep.store import StoreError
from ccsweep.store.s3 import S3Store
from ccsweep.store.s3config import load_settings


def test_defaults_are_aws_over_tls(tmp_path: Path):
    settings = load_settings({"XDG_CONFIG_HOME": str(tmp_path)})
    assert settings.endpoint == "s3.amazonaws.com" and settings.secure and settings.access_key is None


def test_config_file_is_read_and_environment_wins(tmp_path: Path):
    config = tmp_path / "ccsweep" / "s3.yaml"
    config.parent.mkdir()
    config.write_text("endpoint: minio.local:9000\naccess_key: file-key\nsecret_key: file-secret\nsecure: false\n"
                      "ca_bundle: /etc/ca.pem\n")
    settings = load_settings({"XDG_CONFIG_HOME": str(tmp_path), "CCSWEEP_S3_ACCESS_KEY": "env-key",
                              "AWS_SECRET_ACCESS_KEY": "aws-secret"})
    assert (settings.endpoint, settings.access_key, settings.secret_key) == (
        "minio.local:9000", "env-key", "aws-secret")
    assert settings.secure is False and settings.ca_bundle == Path("/etc/ca.pem")


def test_ccsweep_names_win_over_aws_names():
    settings = load_settings({"CCSWEEP_S3_CONFIG": "/dev/null", "CCSWEEP_S3_SECRET_KEY": "mine",
                              "AWS_SECRET_ACCESS_KEY": "theirs", "AWS_DEFAULT_REGION": "eu-west-1"})
    assert settings.secret_key == "mine" and settings.region == "eu-west-1"


@pytest.mark.parametrize("endpoint, secure", [("https://s3.example.org", True), ("http://minio:9000", False)])
def test_endpoint_url_sets_tls_unless_told(endpoint: str, secure: bool):
    settings = load_settings({"CCSWEEP_S3_CONFIG": "/dev/null", "AWS_ENDPOINT_URL": endpoint})
    assert settings.endpoint == endpoint.split("://")[1] and settings.secure is secure
    told = load_settings({"CCSWEEP_S3_CONFIG": "/dev/null", "AWS_ENDPOINT_URL": endpoint, "CCSWEEP_S3_SECURE": "true"})
    assert told.secure is True


@pytest.mark.parametrize("env, message", [
    ({"CCSWEEP_S3_SECURE": "maybe"}, r"CCSWEEP_S3_SECURE='maybe': .*\(allowed: true or false\)"),
    ({"CCSWEEP_S3_ENDPOINT": "ftp://x"}, r"CCSWEEP_S3_ENDPOINT='ftp://x': expected host:port or http\(s\)://host:port"),
])
def test_bad_settings_are_one_line_naming_the_variable(env: dict[str, str], message: str):
    with pytest.raises(StoreError, match=message) as caught:
        load_settings({"CCSWEEP_S3_CONFIG": "/dev/null", **env})
    assert "\n" not in str(caught.value)


def test_unknown_config_key_names_the_file_and_allowed_keys(tmp_path: Path):
    config = tmp_path / "s3.yaml"
    config.write_text("endpoint: x:1\npassword: p\n")
    with pytest.raises(StoreError, match=rf"{config}: password \(value not shown\): .*\(allowed: endpoint, access_key"):
        load_settings({"CCSWEEP_S3_CONFIG": str(config)})


SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("text", [
    f"secret_key: [{SECRET}]\n",                  # a list where a string belongs
    f"secret_key: {{nested: {SECRET}}}\n",         # a mapping
    f"secretkey: {SECRET}\n",                     # a misspelt key holding the secret
    f"access_key: ok\nsecret_key: \"{SECRET}\n",  # unterminated quote: YAML's own message quotes the line
    f"endpoint: http://admin:{SECRET}@minio:9000\n",  # credentials in the endpoint URL
    f"session_token: !!binary {SECRET}\n",         # a YAML tag that fails to decode
])
def test_errors_never_show_a_secret(tmp_path: Path, text: str):
    config = tmp_path / "s3.yaml"
    config.write_text(text)
    with pytest.raises(StoreError) as caught:
        load_settings({"CCSWEEP_S3_CONFIG": str(config)})
    message = str(caught.value)
    assert SECRET not in message and SECRET[:12] not in message, message
    assert str(config) in message and "\n" not in message


def test_a_secret_in_the_environment_is_not_shown_either():
    with pytest.raises(StoreError) as caught:
        load_settings({"CCSWEEP_S3_CONFIG": "/dev/null", "AWS_ENDPOINT_URL": f"https://k:{SECRET}@s3.example.org"})
    assert SECRET not in str(caught.value) and "AWS_ENDPOINT_URL" in str(caught.value)


@pytest.mark.parametrize("url", ["s3://", "s3://Bad_Bucket/p", "s3://ok-bucket/p?x=1"])
def test_bad_store_urls_are_refused_before_any_network(url: str):
    with pytest.raises(StoreError, match="expected s3://BUCKET/PREFIX"):
        S3Store.from_url(url)


def test_url_names_bucket_and_prefix_only():
    store = S3Store.from_url("s3://results/team/a/", load_settings({"CCSWEEP_S3_CONFIG": "/dev/null"}))
    assert (store.bucket, store.prefix, store.url) == ("results", "team/a", "s3://results/team/a")
    assert store.location("cells/x/result.json") == "s3://results/team/a/cells/x/result.json"
