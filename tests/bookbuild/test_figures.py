"""What the figures module computes besides sizes: the projection drawn in the chapters' maps."""
import numpy as np

from textglauber import figures


def test_principal_components_are_the_top_eigenvectors_of_the_covariance():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(40, 5)) @ np.diag([5.0, 3.0, 1.0, 0.5, 0.1]) + 7.0
    pc = figures.principal_components(points, 2)
    assert pc.shape == (40, 2)
    assert np.allclose(pc.mean(0), 0)                                   # centred
    eigen = np.linalg.eigvalsh(np.cov(points.T))[::-1]
    np.testing.assert_allclose(np.cov(pc.T), np.diag(eigen[:2]), atol=1e-9)   # the two largest variances, uncorrelated


def test_principal_components_of_a_stack_are_those_of_all_its_points():
    rng = np.random.default_rng(1)
    stack = rng.normal(size=(6, 4, 3))                                  # records x chains x dimensions
    pc = figures.principal_components(stack)
    assert pc.shape == (6, 4, 2)
    np.testing.assert_allclose(np.abs(pc.reshape(-1, 2)), np.abs(figures.principal_components(stack.reshape(-1, 3))))
