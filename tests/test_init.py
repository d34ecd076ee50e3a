"""The package's front door (gittinseval/__init__.py): public names, the live layer imported on first use."""

import subprocess
import sys

import gittinseval


def imported_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return set(done.stdout.split())


def test_import_does_not_load_the_live_layer_the_openai_client_or_hydra():
    modules = imported_after("import gittinseval")
    assert not {name for name in modules if name.startswith(("gittinseval.live", "openai", "hydra"))}


def test_the_lazy_names_load_on_first_use():
    modules = imported_after("import gittinseval\ngittinseval.Evaluator")
    assert {"gittinseval.live.evaluator", "openai"} <= modules
    from gittinseval.live import Evaluator, evaluate

    assert gittinseval.Evaluator is Evaluator and gittinseval.evaluate is evaluate


def test_every_public_name_resolves():
    for name in gittinseval.__all__:
        assert getattr(gittinseval, name) is not None
    assert set(gittinseval.__all__) <= set(dir(gittinseval))


def test_the_certificate_is_part_of_the_front_door():
    from gittinseval.core import certificate, confidence_stop, session

    for module, names in ((certificate, ("certify", "Certificate", "CertificateSettings")),
                          (confidence_stop, ("ConfidenceStop", "StopReason")),
                          (session, ("RunSession", "RunSettings"))):
        for name in names:
            assert getattr(gittinseval, name) is getattr(module, name) and name in gittinseval.__all__
