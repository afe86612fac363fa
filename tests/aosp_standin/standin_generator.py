"""A stand-in for AOSP's NNAPI ``test_generator.py``, written for nnconform's importer test.

It implements a small subset of the spec DSL (``Model``, ``Input``, ``Output``,
``IgnoredOutput``, ``Parameter``, ``Internal``, implicit scalar parameters, ``Example`` with
named examples, combined feeds, ``ExpectFailure`` and the ``relaxed`` / ``float16``
variations) behind the interface ``nnconform.cases.vectors_import`` documents: ``FileNames``,
``GetExecScope``, ``Example.DumpAllExamples``, ``NamedTest`` and ``Model.Feed``.  No lifetime
variations, no control flow.  It is test data: the test copies it into a fake checkout as
``tools/test_generator/test_generator.py``.
"""

import copy
import itertools
import os
import re

import numpy as np


class NamedTest:
    """A test name: the non-empty parts joined by '_', made unique with _2, _3, ..."""

    existingNames = set()

    def __init__(self, *parts):
        base = "_".join(str(p) for p in parts if p not in (None, ""))
        name, k = base, 1
        while name in type(self).existingNames:
            k += 1
            name = f"{base}_{k}"
        type(self).existingNames.add(name)
        self.name = name

    def __str__(self):
        return self.name


class Type:
    def __init__(self, type_name, dimensions, scale=0.0, zero_point=0, extra=None):
        self.type, self.dimensions = type_name, list(dimensions)
        self.scale, self.zeroPoint, self.extraParams = float(scale), int(zero_point), extra

    @staticmethod
    def parse(type_name, text):
        """'{2, 3}, 0.5, 10' -> dims [2, 3], scale 0.5, zero point 10."""
        m = re.fullmatch(r"\s*\{([^}]*)\}\s*(?:,\s*([^,]+?)f?\s*(?:,\s*(-?\d+))?)?\s*", text)
        dims = [int(d) for d in m.group(1).split(",") if d.strip()]
        return Type(type_name, dims, float(m.group(2) or 0), int(m.group(3) or 0))


class Operand:
    lifetime = "TEMPORARY_VARIABLE"

    def __init__(self, name, op_type, value=None):
        if isinstance(op_type, tuple):
            self.type = Type(*op_type)
        else:
            self.type = Type.parse(op_type, value)
            value = None
        self.name = name
        self.value = None if value is None else (list(value) if isinstance(value, (list, tuple)) else [value])
        self.outs, self.model_index = [], None


class Input(Operand):
    lifetime = "SUBGRAPH_INPUT"

    def __init__(self, name, op_type, shape=None):
        super().__init__(name, op_type, shape)


class Output(Operand):
    lifetime = "SUBGRAPH_OUTPUT"

    def __init__(self, name, op_type, shape=None):
        super().__init__(name, op_type, shape)


class IgnoredOutput(Output):
    pass


class Internal(Operand):
    def __init__(self, name, op_type, shape=None):
        super().__init__(name, op_type, shape)


class Parameter(Operand):
    def __init__(self, name, op_type, value):
        super().__init__(name, op_type)
        self.value = None if value is None else list(value) if isinstance(value, (list, tuple)) else [value]
        self.lifetime = "NO_VALUE" if value is None else "CONSTANT_COPY"


def Int32Scalar(name, v):
    return Parameter(name, ("INT32", []), int(v))


def Float32Scalar(name, v):
    return Parameter(name, ("FLOAT32", []), float(v))


def BoolScalar(name, v):
    return Parameter(name, ("BOOL", []), bool(v))


def _implicit(x):
    if isinstance(x, Operand):
        return x
    if isinstance(x, bool):
        return BoolScalar("param", x)
    if isinstance(x, int):
        return Int32Scalar("param", x)
    if isinstance(x, float):
        return Float32Scalar("param", x)
    if isinstance(x, (list, tuple)) and all(isinstance(v, int) for v in x):
        return Parameter("param", ("TENSOR_INT32", [len(x)]), list(x))
    raise TypeError(f"cannot make a parameter of {x!r}")


class Operation:
    def __init__(self, optype, ins):
        self.optype, self.ins, self.outs = optype, [_implicit(i) for i in ins], []


class Model:
    models = []

    def __init__(self, name=None):
        self.name, self.operations, self.operands = name, [], []
        self.isRelaxed, self.version = False, FileNames.version
        Model.models.append(self)

    def _add(self, op):
        if all(op is not o for o in self.operands):
            self.operands.append(op)

    def Operation(self, optype, *ins):
        self.operations.append(Operation(optype, ins))
        for i in self.operations[-1].ins:
            self._add(i)
        return self

    def To(self, *outs):
        self.operations[-1].outs = list(outs)
        for o in outs:
            self._add(o)
        return self

    def IntroducedIn(self, version):
        self.version = version
        return self

    def RelaxedExecution(self, relaxed):
        self.isRelaxed = relaxed
        return self

    def GetInputs(self):
        return [o for o in self.operands if isinstance(o, Input)]

    def GetOutputs(self):
        return [o for o in self.operands if isinstance(o, Output)]

    def GetReferencedModels(self):
        return []

    def Feed(self, feed):
        ins, outs = feed
        for o in self.GetInputs():
            o.value = list(ins[o])
        for o in self.GetOutputs():
            n = int(np.prod(o.type.dimensions))
            o.value = [0] * n if isinstance(o, IgnoredOutput) else list(outs[o])
        return self

    def Compile(self):
        for k, o in enumerate(self.operands):
            o.model_index, o.outs = k, []
        for op in self.operations:
            for i in op.ins:
                i.outs.append(op)
        if self.isRelaxed:
            self.version = None
        return self


class Variation:
    def __init__(self, name):
        self.name = name

    def apply(self, model):
        if self.name == "relaxed":
            model.isRelaxed = True
        elif self.name == "float16":
            for o in model.operands:
                if o.type.type in ("TENSOR_FLOAT32", "FLOAT32"):
                    o.type.type = o.type.type.replace("32", "16")
                    if o.value is not None:
                        o.value = [float(np.float32(np.float16(v))) for v in o.value]
        return model


class Example:
    examples = []

    def __init__(self, *feeds, model=None, name=None):
        self.model = model or Model.models[-1]
        self.name = name
        self.feedDicts = [
            ({o: f[o] for o in self.model.GetInputs()}, {o: f[o] for o in self.model.GetOutputs() if o in f})
            for f in feeds
        ]
        self.expectFailure = False
        self.expectedMultinomialDistributionTolerance = 0
        self.variations = []
        Example.examples.append(self)

    def AddVariations(self, *names):
        self.variations.append([Variation("")] + [Variation(n) for n in names])
        return self

    def ExpectFailure(self):
        self.expectFailure = True
        return self

    @staticmethod
    def DumpAllExamples(DumpModel=None, model_fd=None, DumpExample=None, example_fd=None, DumpTest=None, test_fd=None):
        combined = {}
        for ex in Example.examples:  # same model and name: one example, more feeds
            key = (id(ex.model), ex.name)
            if key in combined:
                combined[key].feedDicts.extend(ex.feedDicts)
            else:
                combined[key] = ex
        for ex in combined.values():
            ex.dump(DumpExample, example_fd)

    def dump(self, callback, fd):
        original = self.model
        for feed in self.feedDicts:
            original.Feed(feed)
            for chosen in itertools.product(*self.variations):
                self.model = copy.deepcopy(original)
                for v in chosen:
                    self.model = v.apply(self.model)
                self.testName = NamedTest(FileNames.specName, self.model.name, self.name, *[v.name for v in chosen])
                self.model.Compile()
                if callback is not None and fd is not None:
                    callback(self, fd)
                self.model = original


class FileNames:
    specFiles, specNames = [], []
    specFile = specName = ""
    version = None
    fileIndex = 0

    @staticmethod
    def InitializeFileLists(spec, example):
        if os.path.isdir(spec):
            FileNames.specFiles = sorted(
                os.path.join(os.path.abspath(spec), f) for f in os.listdir(spec) if f.endswith(".mod.py")
            )
        else:
            FileNames.specFiles = [os.path.abspath(spec)]
        FileNames.specNames = [os.path.basename(f).split(".")[0] for f in FileNames.specFiles]

    @staticmethod
    def NextFile():
        if FileNames.fileIndex >= len(FileNames.specFiles):
            return False
        FileNames.specFile = FileNames.specFiles[FileNames.fileIndex]
        FileNames.specName = FileNames.specNames[FileNames.fileIndex]
        FileNames.fileIndex += 1
        NamedTest.existingNames = set()
        Model.models, Example.examples = [], []
        m = re.findall(r"/(V\d_\d|AIDL_V\d+)/", FileNames.specFile)
        FileNames.version = m[-1] if m else None
        return True


def GetExecScope():
    return dict(
        Model=Model,
        Input=Input,
        Output=Output,
        IgnoredOutput=IgnoredOutput,
        Parameter=Parameter,
        Internal=Internal,
        Int32Scalar=Int32Scalar,
        Float32Scalar=Float32Scalar,
        BoolScalar=BoolScalar,
        Example=Example,
    )
