"""Types of the mini retail domain's tools (test data written for Arena, in tau2-bench's layout)."""

# ruff: noqa: UP045

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, Field

Channel = Literal["phone", "email"]
Weekday = Annotated[Literal["mon", "tue", "wed"], Field(description="A working day")]


class Window(BaseModel):
    start_hour: int = Field(description="First hour of the window, 0-23")
    end_hour: int = Field(24, description="Hour the window closes")


class ContactBase(BaseModel):
    kind: str = Field(description="How to reach the customer")
    value: str = Field(description="Where to reach them")


class PhoneContact(ContactBase):
    """A phone number to call back."""

    kind: Literal["phone"] = Field(description="Always 'phone'")
    extension: Optional[str] = Field(None, description="Extension, if any")


class CallbackSlot(BaseModel):
    """When and how the shop calls the customer back."""

    day: Weekday
    window: Window = Field(description="The hours the customer is free")
    backup: Optional[Window] = None
    contacts: list[PhoneContact | dict] = Field(default_factory=list, description="Numbers to try")
    priority: float = 1.0
