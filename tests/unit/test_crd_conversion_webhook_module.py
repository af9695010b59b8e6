"""liqo.fabric.crd_conversion_webhook's pure steps: where the CRDs' conversion webhook is written."""
import yaml

from ansible_collections.liqo.fabric.plugins.modules.crd_conversion_webhook import client_config, without_null_url
from tests.conftest import ROOT


def definitions():
    with open(f"{ROOT}/deploy/crds/networking.liqo.io_gatewayservers.yaml", encoding="utf-8") as f:
        return [yaml.safe_load(f)]


def config(defs):
    return defs[0]["spec"]["conversion"]["webhook"]["clientConfig"]


def test_the_files_url_null_is_not_applied_and_a_url_replaces_the_service():
    files = definitions()
    assert config(files) == {"url": None, "service": {"namespace": "liqo", "name": "liqo-fabric-webhook",
                                                      "path": "/convert", "port": 443}}
    assert "url" not in config(without_null_url(files)) and "service" in config(without_null_url(files))
    assert config(client_config(files, "https://127.0.0.1:9443/convert", "Q0E=")) == {
        "url": "https://127.0.0.1:9443/convert", "caBundle": "Q0E="}
    assert config(files)["url"] is None   # the input is left as it was
