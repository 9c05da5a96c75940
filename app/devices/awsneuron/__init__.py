"""AWS Neuron devices and NeuronCores (HAMi `pkg/device/awsneuron`, vendors §2.10)."""

from app.devices.awsneuron.device import AwsNeuron, AwsNeuronConfig, parse_awsneuron_config

__all__ = ["AwsNeuron", "AwsNeuronConfig", "parse_awsneuron_config"]
