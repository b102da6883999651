"""The allreduce client over an aggregating switch (or the host-based parameter server)."""

from worker.allreduce.client import AllReduceClient, AllReduceError, JobParams
from worker.allreduce.job import job_params
from worker.allreduce.stats import Stats

__all__ = ["AllReduceClient", "AllReduceError", "JobParams", "Stats", "job_params"]
