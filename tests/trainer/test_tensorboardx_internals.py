"""trainer/metrics.py writes TensorBoard's event file with tensorboardX's internals (EventsWriter, the Event
protobuf, summary.scalar) rather than its public SummaryWriter, whose queue loses events on a kill. A minor
release may move them, so pyproject caps tensorboardX below the next one, and this file checks the
installed release still writes what TensorBoard reads; raise the cap only where it passes."""

from __future__ import annotations

import struct
from importlib.metadata import version

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.paths import REPO
from trainer.metrics import Reporter

(REQUIREMENT,) = (
    Requirement(d)
    for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    if d.startswith("tensorboardX")
)


def test_pyproject_caps_tensorboardx_below_its_next_minor_release_and_this_one_is_inside():
    installed = Version(version("tensorboardX"))
    assert REQUIREMENT.specifier.contains(installed)
    upper = [Version(spec.version) for spec in REQUIREMENT.specifier if spec.operator == "<"]
    assert upper and upper[0] <= Version(f"{installed.major}.{installed.minor + 1}"), REQUIREMENT


def test_the_reporter_writes_the_event_file_tensorboard_reads(tmp_path, capsys):
    from tensorboardX.proto.event_pb2 import Event, SessionLog

    reporter = Reporter(True, tmp_path)
    reporter.resume_after(6)
    reporter.train_progress(1, 1, 10, 64, 640, loss=0.5, step=7, lr=0.1)
    reporter.evaluation(1, accuracy=0.875, val_loss=0.25)
    reporter.close()
    capsys.readouterr()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    content, events, offset = path.read_bytes(), [], 0
    while offset < len(content):  # TFRecord: length, its CRC, the event, its CRC
        (length,) = struct.unpack("<Q", content[offset : offset + 8])
        events.append(Event.FromString(content[offset + 12 : offset + 12 + length]))
        offset += 12 + length + 4
    assert events[0].file_version.startswith("brain.Event:"), "the header TensorBoard looks for"
    (start,) = [e for e in events if e.HasField("session_log")]
    assert start.session_log.status == SessionLog.START and start.step == 7
    scalars = {(v.tag, e.step): v.simple_value for e in events for v in e.summary.value}
    assert scalars == pytest.approx({("loss", 7): 0.5, ("lr", 7): 0.1, ("accuracy", 1): 0.875, ("val_loss", 1): 0.25})
