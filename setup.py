"""Packaging for syncswitch (console script `syncswitch`)."""

from setuptools import find_packages, setup

setup(
    name="syncswitch",
    version="0.1.0",
    description="Parameter-server TensorFlow training that switches BSP to ASP at the right moment",
    long_description=open("README.md", encoding="utf-8").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["syncswitch", "syncswitch.*"]),
    package_data={"syncswitch.wire": ["*.proto"]},
    install_requires=[
        "tensorflow>=2.16,<2.22",
        "tf-keras>=2.16,<2.22",
        "grpcio>=1.60,<2",
        "protobuf>=7.35,<8",  # the generated agent_pb2 checks its runtime version
        "click>=8.1,<9",
        "pyyaml>=6,<7",
        "numpy>=1.26",
        "ml_dtypes>=0.3",  # bfloat16 for the simulator's compressed all-reduce (TensorFlow depends on it too)
        "psutil>=5.9",
        "tensorboard>=2.16",
        "matplotlib>=3.7",
        "mnist1d>=0.0.2",
        "scikit-learn>=1.3",
    ],
    extras_require={
        # CI's lint and documentation site (.ci/run: ruff, mkdocs --strict with the material theme), and the ray
        # backend's tests on a real local Ray cluster
        "test": ["pytest>=7", "pytest-timeout>=2.1", "grpcio-tools>=1.60,<2", "ruff>=0.6", "mkdocs>=1.6,<2",
                 "mkdocs-material>=9.5,<10", "ray>=2.40"],
        "gce": ["google-cloud-compute>=1.47,<2"],  # 1.47: the first that allows protobuf 7
        "ray": ["ray>=2.40"],  # placement groups' wait(timeout_seconds) and PlacementGroupSchedulingStrategy
    },
    entry_points={"console_scripts": ["syncswitch=syncswitch.cli:main"]},
)
